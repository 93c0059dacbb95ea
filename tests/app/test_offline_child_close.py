"""The local host closing while the offline summarizer's child process starts: no traceback.

A backlog's batch is summarized in a child process, started (spawn) by the first such batch.
When the host closed while that child was still starting, and the closed summarizer was
collected, the child could no longer find the stop event it was handed (a named semaphore,
unlinked with it) and printed a `multiprocessing` traceback on the host's stderr. The host
must close cleanly, the child gone.
"""

from __future__ import annotations

import gc
import multiprocessing

import httpx

from memory_worker.local import EmbeddedMemoryHost
from tests.support import TOKEN, wait_until

AUTH = {"authorization": f"Bearer {TOKEN}"}
LONG = "the lighthouse keeper wrote about storms, ships and the long winter nights " * 3  # ~220 chars


async def test_the_host_closes_cleanly_while_the_summarizers_child_starts(tmp_path, capfd):
    before = set(multiprocessing.active_children())
    async with (
        EmbeddedMemoryHost(tmp_path / "data", token=TOKEN) as host,
        httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False, timeout=30) as client,
    ):
        inner = host.host
        assert inner is not None
        # 26 long turns: the compaction of 21 of them (over 3,000 characters) goes to the child.
        for i in range(26):
            r = await client.post("/v1/chats/c/turn", json={"text": f"{i}: {LONG}", "message_id": f"m{i}"})
            assert r.status_code == 200
        await wait_until(lambda: inner.scheduler.running == 1, timeout=20, what="the compaction")
        children = set(multiprocessing.active_children()) - before
        assert children, "the batch did not go to a child process"
    inner = host = None  # type: ignore[assignment]
    gc.collect()  # the closed summarizer is gone, as in a process that goes on after the host
    await wait_until(
        lambda: not (set(multiprocessing.active_children()) & children), timeout=30, what="the child's end"
    )
    err = capfd.readouterr().err
    assert "Traceback" not in err, err[-3000:]


def test_a_summarizer_closed_as_its_child_starts_leaves_no_traceback(capfd):
    import asyncio

    from memory_worker.local.offline import OfflineSummarizer

    rows = [{"role": "user", "author": "Ann", "text": f"{i}: {LONG}", "ts": "t"} for i in range(21)]
    before = set(multiprocessing.active_children())

    async def run() -> None:
        summarizer = OfflineSummarizer(inline_max_chars=0)
        task = asyncio.ensure_future(summarizer("", rows))
        await asyncio.sleep(0)  # the batch is submitted: the child is starting
        summarizer.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    gc.collect()
    children = set(multiprocessing.active_children()) - before

    async def ended() -> None:
        await wait_until(lambda: not (set(multiprocessing.active_children()) & children), timeout=30)

    asyncio.run(ended())
    err = capfd.readouterr().err
    assert "Traceback" not in err, err[-3000:]
