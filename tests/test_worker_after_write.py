"""The Durable Object's step after a write: the reminders' alarm is set on its own.

Scheduling a compaction and setting the reminders' alarm shared one try block: an error
while scheduling the compaction skipped the reminder's alarm, which then waited for some
later write (a reminder must always arrive). Today no route both grows the history and
writes a reminder, but `Kind` is data in the route table; the test gives `add_reminder`
`grows=True` and makes the compaction's check fail, under the fake workerd.
"""

from __future__ import annotations

import dataclasses


async def test_a_failed_compaction_schedule_still_sets_the_reminders_alarm(worker, monkeypatch, caplog):
    entry = worker.entry
    real_kind = entry.kind

    def kind(name: str):
        effects = real_kind(name)
        return dataclasses.replace(effects, grows=True) if name == "add_reminder" else effects

    def broken(memory) -> bool:
        raise RuntimeError("the compaction check failed")

    monkeypatch.setattr(entry, "kind", kind)
    monkeypatch.setattr(entry, "alarm_needed", broken)
    due = entry.now_ms() + 3_600_000
    await worker.ok("POST", "/v1/chats/rm/reminders", {"text": "in an hour", "due_at": due})
    assert worker.runtime.alarm_of("rm") == due  # was None: skipped with the compaction's step
    assert "could not schedule compaction after add_reminder" in caplog.text  # logged, call answered
