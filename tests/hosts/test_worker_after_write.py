"""The Durable Object's step after a write: the reminders' alarm is set on its own.

Scheduling a compaction and setting the reminders' alarm shared one try block: an error
while scheduling the compaction skipped the reminder's alarm, which then waited for some
later write (a reminder must always arrive). Today no route both grows the history and
writes a reminder, but `Kind` is data in the route table; the test gives `add_reminder`'s
operation `grows=True` and makes the compaction's check fail, under the fake workerd.

A reminders' alarm whose setAlarm fails is not left to some later write either (the row is
committed, and add_reminder has no idempotency key, so the call is answered 200): the object
sets it on its next request of any kind, retries it soon, and a new instance checks it.
"""

from __future__ import annotations

import dataclasses


async def test_a_failed_compaction_schedule_still_sets_the_reminders_alarm(worker, monkeypatch, caplog):
    entry = worker.entry
    real_parse = entry.parse

    def parse(req, token):
        op = real_parse(req, token)
        if getattr(op, "name", None) != "add_reminder":
            return op
        return dataclasses.replace(op, kind=dataclasses.replace(op.kind, grows=True))

    def broken(memory) -> bool:
        raise RuntimeError("the compaction check failed")

    monkeypatch.setattr(entry, "parse", parse)
    monkeypatch.setattr(entry, "alarm_needed", broken)
    due = entry.now_ms() + 3_600_000
    await worker.ok("POST", "/v1/chats/rm/reminders", {"text": "in an hour", "due_at": due})
    assert worker.runtime.alarm_of("rm") == due  # was None: skipped with the compaction's step
    assert "could not schedule compaction after add_reminder" in caplog.text  # logged, call answered


# -- a failed setAlarm: the reminder still gets its alarm without another write ------------


def _flaky_alarm_storage(worker, chat: str, failures: int):
    """Give the chat's object a storage whose setAlarm fails `failures` times, then works."""
    from tests.fakes.workers import _js
    from tests.fakes.workers.runtime import DurableObjectStorage

    class FlakyAlarms(DurableObjectStorage):
        def setAlarm(self, scheduled_time, options=None):
            if self._props["failures_left"] > 0:
                self._props["failures_left"] -= 1
                return _js.JsPromise(error=_js.JsException("Error", "storage operation failed"))
            return super().setAlarm(scheduled_time, options)

    runtime = worker.runtime
    key = runtime.namespace.idFromName(chat).toString()
    storage = FlakyAlarms(runtime.data_dir / f"{key}.sqlite3", runtime.alarms, key)
    storage._props["failures_left"] = failures
    runtime.storages[key] = storage  # taken by the object when it is first built
    return storage


async def test_a_failed_set_alarm_is_set_again_on_the_next_request_of_any_kind(worker, monkeypatch, caplog):
    monkeypatch.setattr(worker.entry, "ALARM_RETRY_DELAYS_S", ())  # no retry soon: only a request
    storage = _flaky_alarm_storage(worker, "quiet", failures=1)
    due = worker.entry.now_ms() + 3_600_000
    await worker.ok("POST", "/v1/chats/quiet/reminders", {"text": "in an hour", "due_at": due})
    assert "could not set the reminders' alarm after add_reminder" in caplog.text  # answered 200
    assert worker.runtime.alarm_of("quiet") is None and storage._props["failures_left"] == 0
    # A read, not a write to the chat: before, the reminder waited for some later write.
    await worker.ok("GET", "/v1/chats/quiet/reminders")
    assert worker.runtime.alarm_of("quiet") == due


async def test_a_failed_set_alarm_is_retried_soon_without_any_request(worker, monkeypatch):
    from tests.support import wait_until

    monkeypatch.setattr(worker.entry, "ALARM_RETRY_DELAYS_S", (0, 0, 0))
    storage = _flaky_alarm_storage(worker, "silent", failures=2)  # the write's set and one retry
    due = worker.entry.now_ms() + 3_600_000
    await worker.ok("POST", "/v1/chats/silent/reminders", {"text": "in an hour", "due_at": due})
    await wait_until(lambda: worker.runtime.alarm_of("silent") == due, what="the retried alarm")
    assert storage._props["failures_left"] == 0
    await worker.runtime.run_alarms()  # it rings, and hands the reminder over
    assert worker.runtime.alarm_runs[-1] == ("silent", "ok")


async def test_an_object_evicted_before_its_retry_sets_the_alarm_on_its_next_request(worker, monkeypatch):
    monkeypatch.setattr(worker.entry, "ALARM_RETRY_DELAYS_S", ())
    _flaky_alarm_storage(worker, "evicted", failures=1)
    due = worker.entry.now_ms() + 3_600_000
    await worker.ok("POST", "/v1/chats/evicted/reminders", {"text": "in an hour", "due_at": due})
    assert worker.runtime.alarm_of("evicted") is None
    worker.runtime.restart()  # the instance that knew of the failure is gone
    await worker.ok("GET", "/v1/chats/evicted/reminders")
    assert worker.runtime.alarm_of("evicted") == due
