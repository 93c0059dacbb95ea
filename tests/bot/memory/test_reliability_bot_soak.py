"""Soak runs of the bot (`make soak`): many chats at once while the model, the memory worker and
the Bot API fail at random, then every chat is counted: nothing lost, nothing doubled."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter

import pytest

from bot.chat.pipeline import APOLOGY
from memory_worker.local import EmbeddedMemoryHost
from tests.fakes.openai_server import Echo, FakeOpenAI, Garbage, RateLimit, ServerError
from tests.fakes.telegram_server import ApiError, FakeTelegram
from tests.support import (
    MEMORY_TOKEN,
    TcpGate,
    answers,
    make_settings,
    msg,
    port_of,
    running_pipeline,
    telegram_bot,
    telegram_settings,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]

CHATS = 50
TURNS = 10


async def flap(mem_dir, gate: TcpGate, outages: int, up_s: float, down_s: float, stop: asyncio.Event) -> int:
    """Keep the memory worker behind `gate`, taking it down `outages` times; returns the outages done."""
    done = 0
    while not stop.is_set():
        async with EmbeddedMemoryHost(mem_dir, token=MEMORY_TOKEN, port=0) as host:
            await gate.open(port_of(host.url))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(up_s):  # up for a while, or until the run ends
                    await stop.wait()
            if stop.is_set() or done >= outages:
                await stop.wait()
                return done
            await gate.shut()
        done += 1
        await asyncio.sleep(down_s)  # the length of the outage: pacing, not waiting for something
    return done


async def test_soak_pipeline_50_chats_with_model_faults_and_memory_flaps(tmp_path):
    rng = random.Random(2026)
    mem_dir = tmp_path / "memory"
    gate = TcpGate()  # the worker's address; the hosts behind it come and go
    url = gate.url
    faults = [lambda: RateLimit(retry_after=None), lambda: ServerError(502), lambda: Garbage()]
    async with gate, FakeOpenAI() as fake:
        fake.responder = lambda req: rng.choice(faults)() if rng.random() < 0.2 else Echo(prefix="")
        settings = make_settings(fake.url, memory_url=url, memory_token=MEMORY_TOKEN, request_timeout_s=2.0)
        stop = asyncio.Event()
        flapping = asyncio.create_task(flap(mem_dir, gate, outages=5, up_s=0.5, down_s=0.5, stop=stop))
        async with running_pipeline(settings, tmp_path / "bot") as pipeline:

            async def chat(c: int) -> list[str]:
                return [
                    (
                        await pipeline.handle(
                            msg(f"chat {c} turn {t} about tea", chat=f"soak:{c}", message_id=f"{c}-{t}")
                        )
                    ).text
                    for t in range(TURNS)
                ]

            replies = await asyncio.gather(*(chat(c) for c in range(CHATS)))
            stop.set()
            outages = await flapping
            async with EmbeddedMemoryHost(mem_dir, token=MEMORY_TOKEN, port=0) as host:
                await gate.open(port_of(host.url))
                await wait_until(lambda: len(pipeline.outbox) == 0, timeout=60, what="outbox replay")
                totals = [
                    int((await pipeline.memory.stats(f"soak:{c}"))["total_messages"]) for c in range(CHATS)
                ]
                calls = 0
                for c in range(CHATS):
                    usage = await pipeline.memory.usage(f"soak:{c}")
                    calls += sum(int(r["calls"]) for r in usage["tiers"].values())
    answered = [sum(r != APOLOGY for r in rs) for rs in replies]
    for c, rs in enumerate(replies):
        assert all(r == APOLOGY or r == f"chat {c} turn {t} about tea" for t, r in enumerate(rs)), c
    assert outages >= 1
    assert totals == [TURNS + a for a in answered]  # every question and answer once, none doubled
    assert calls == len(fake.requests)  # one usage row per model attempt, replays included
    print(
        f"\n[soak] pipeline: {CHATS * TURNS} turns, {len(fake.requests)} model attempts, "
        f"{outages} memory outages, "
        f"{sum(answered)} answered, {CHATS * TURNS - sum(answered)} apologies, 0 lost, 0 doubled"
    )


async def test_soak_telegram_20_chats_with_bot_api_5xx_and_a_memory_outage(tmp_path):
    rng = random.Random(7)
    chats, turns = 20, 5
    mem_dir = tmp_path / "memory"
    gate = TcpGate()  # the worker's address; the hosts behind it come and go
    url = gate.url
    async with gate, FakeTelegram() as tg, FakeOpenAI(default=Echo()) as openai:
        users = [tg.user(5000 + c, f"U{c}") for c in range(chats)]
        rooms = [tg.private_chat(u) for u in users]
        settings = telegram_settings(tg, openai, streaming=False, send_budget_s=30.0, memory_url=url)
        stop = asyncio.Event()
        flapping = asyncio.create_task(flap(mem_dir, gate, outages=1, up_s=1.5, down_s=1.0, stop=stop))
        async with telegram_bot(settings, tg, tmp_path / "bot") as pipeline:
            # A quarter of all sends fail with a 5xx, at random: an unreliable Bot API, not a dead one.
            injected = Counter()
            take_fault = tg._take_fault

            def flaky(method: str):
                if method == "sendMessage" and rng.random() < 0.25:
                    injected[method] += 1
                    return ApiError(rng.choice([500, 502]), "Internal Server Error")
                return take_fault(method)

            tg._take_fault = flaky
            for t in range(turns):
                for user, room in zip(users, rooms, strict=False):
                    tg.send(room, user, f"turn {t} from {user['first_name']}")
            done = lambda: all(len(tg.bot_messages(r["id"])) >= turns for r in rooms)  # noqa: E731
            await tg.wait_until(done, timeout=240)
            stop.set()
            outages = await flapping
            async with EmbeddedMemoryHost(mem_dir, token=MEMORY_TOKEN, port=0) as host:
                await gate.open(port_of(host.url))
                await wait_until(lambda: len(pipeline.outbox) == 0, timeout=60, what="outbox replay")
                totals = [
                    int((await pipeline.memory.stats(f"telegram:{r['id']}"))["total_messages"]) for r in rooms
                ]
    failed = Counter(c.status for c in tg.calls_to("sendMessage", ok=False))
    for user, room in zip(users, rooms, strict=False):
        name = user["first_name"]
        # Each answer delivered once, in order.
        assert answers(tg, room["id"]) == [f"echo: {name}: turn {t} from {name}" for t in range(turns)]
    assert totals == [2 * turns] * chats
    assert sum(failed.values()) > 0 and outages == 1
    print(
        f"\n[soak] telegram: {chats * turns} turns, {sum(failed.values())} Bot API 5xx survived "
        f"({injected['sendMessage']} injected), {outages} memory outage, 0 lost, 0 doubled"
    )
