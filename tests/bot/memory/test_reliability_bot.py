"""Faults on the bot side, each ending with a count that proves nothing was lost or doubled.

A Telegram Bot API outage during a reply (5xx, then refused connections), the same for
Discord's REST API, every model tier failing in turn over 50 messages, and the memory worker
out of reach in the middle of a Telegram conversation. Messages are counted in the memory
worker (GET /stats, /search, /usage) and on the fake platform (the messages it holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import sys
from dataclasses import replace

import pytest

from bot.chat.pipeline import APOLOGY, CUT_OFF
from bot.config import Settings
from memory_worker.local import EmbeddedMemoryHost
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import Answer, Echo, FakeOpenAI, Garbage, Hang, RateLimit, ServerError
from tests.support import (
    INSTANT,
    MEMORY_TOKEN,
    TcpGate,
    World,
    answers,
    clean_env,
    default_config_settings,
    discord_env,
    make_settings,
    msg,
    port_of,
    running_client,
    running_pipeline,
    telegram_bot,
    telegram_settings,
    tier_totals,
    wait_until,
)

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

# ----------------------------------------------------------------------------- helpers


async def memory_texts(pipeline, chat: str, query: str) -> list[str]:
    """Every stored message matching `query`, in the order the worker stored them."""
    results = await pipeline.memory.search(chat, query, k=20)
    return [r["text"] for r in sorted(results, key=lambda r: r["id"])]


# ----------------------------------------------------------------------------- Telegram outage


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "whole"])
async def test_telegram_5xx_during_a_reply_delivers_it_once_when_back(tg, openai, tmp_path, streaming):
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    settings = telegram_settings(tg, openai, streaming=streaming)
    async with telegram_bot(settings, tg, tmp_path) as pipeline:
        tg.fail_next("sendMessage", 502, times=2)
        tg.fail_next("sendMessage", 500, times=1)
        tg.send(chat, alice, "hello while Telegram is down")
        await tg.wait_for_message(chat["id"], timeout=15)
        tg.send(chat, alice, "and once it is back")
        await tg.wait_for_message(chat["id"], count=2, timeout=15)
        stats = await pipeline.memory.stats(f"telegram:{chat['id']}")
    assert [c.status for c in tg.calls_to("sendMessage")] == [502, 502, 500, 200, 200]
    assert answers(tg, chat["id"]) == [
        "echo: Alice: hello while Telegram is down",
        "echo: Alice: and once it is back",
    ]
    assert stats["total_messages"] == 4  # two questions, two answers: nothing lost, nothing doubled


async def test_telegram_refusing_connections_during_a_reply_delivers_it_once_when_back(tg, tmp_path, caplog):
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    gate = TcpGate(tg.port)
    await gate.open()
    async with FakeOpenAI() as openai:
        openai.script(Answer("the answer written during the outage", delay=0.3))
        settings = telegram_settings(
            tg, openai, base_url=f"http://127.0.0.1:{gate.port}/bot", streaming=False
        )
        async with telegram_bot(settings, tg, tmp_path) as pipeline:
            tg.send(chat, alice, "please answer through the outage")
            await openai.wait_requests(1, timeout=10)
            await gate.shut()  # Telegram is gone while the model writes: connections are refused
            await wait_until(
                lambda: "sending to chat 111 failed" in caplog.text, timeout=10, what="a refused send"
            )
            assert tg.bot_messages(chat["id"]) == []
            await gate.open()
            [answer] = await tg.wait_for_message(chat["id"], timeout=15)
            stats = await pipeline.memory.stats("telegram:111")
        await gate.close()
    assert answer["text"] == "the answer written during the outage"
    assert len(tg.calls_to("sendMessage", ok=True)) == 1  # delivered once
    assert stats["total_messages"] == 2


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "whole"])
async def test_telegram_down_past_the_budget_logs_keeps_memory_and_goes_on(
    tg, openai, tmp_path, caplog, streaming
):
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    settings = telegram_settings(tg, openai, streaming=streaming, send_budget_s=0.6)
    async with telegram_bot(settings, tg, tmp_path) as pipeline:
        tg.fail_next("sendMessage", 502, times=1000)
        tg.send(chat, alice, "an answer nobody will see")
        await wait_until(
            lambda: "not delivered" in caplog.text or "gave up showing" in caplog.text,
            timeout=15,
            what="the give-up line",
        )
        tg.faults.clear()  # Telegram is back
        tg.send(chat, alice, "are you still there?")
        [answer] = await tg.wait_for_message(chat["id"], timeout=15)
        texts = await memory_texts(pipeline, "telegram:111", "answer nobody see still there")
    assert answer["text"] == "echo: Alice: are you still there?"
    # The conversation in memory is whole: the undelivered answer too, once.
    assert texts == [
        "an answer nobody will see",
        "echo: Alice: an answer nobody will see",
        "are you still there?",
        "echo: Alice: are you still there?",
    ]


# ----------------------------------------------------------------------------- Discord outage


def discord_settings(
    fake: FakeDiscord, openai: FakeOpenAI, *, streaming: bool, send_budget_s: float
) -> Settings:
    """The default config/bot.toml on the fake Discord and the fake model."""
    settings = default_config_settings(
        discord_env(fake, openai, api_key="sk-test-reliability-0123456789abcdef")
    )
    return replace(
        settings, discord=replace(settings.discord, streaming=streaming, send_budget_s=send_budget_s)
    )


@pytest.mark.parametrize("how", ["503", "disconnect"])
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "whole"])
async def test_discord_rest_outage_during_a_reply_delivers_it_once_when_back(
    fake_discord, openai, tmp_path, how, streaming
):
    fake = fake_discord
    world = World(fake)
    settings = discord_settings(fake, openai, streaming=streaming, send_budget_s=10.0)
    posts = lambda: fake.calls_to("POST", rf"/channels/{world.dm['id']}/messages")  # noqa: E731
    async with running_pipeline(settings, tmp_path) as pipeline, running_client(pipeline, settings):
        fake.fail_next(lambda c: c.method == "POST" and c.path.endswith("/messages"), how=how, times=4)
        await fake.user_says(world.dm, world.member, "hello while Discord is down")
        await fake.wait_for(
            lambda: fake.shown(world.dm) == ["echo: Bob: hello while Discord is down"], timeout=15
        )
        stats = await pipeline.memory.stats(f"discord:{world.dm['id']}")
    assert len(posts()) == 5 and len({c.json["nonce"] for c in posts()}) == 1  # one nonce: Discord keeps one
    assert all(c.json["enforce_nonce"] for c in posts())
    assert fake.shown(world.dm) == ["echo: Bob: hello while Discord is down"]  # delivered once
    assert stats["total_messages"] == 2


async def test_discord_refusing_connections_during_a_reply_delivers_it_once_when_back(
    fake_discord, tmp_path, caplog
):
    fake = fake_discord
    world = World(fake)
    gate = TcpGate(fake.port)  # REST goes through the gate; the gateway websocket stays direct
    await gate.open()
    async with FakeOpenAI(default=Answer("the answer written during the outage", delay=0.3)) as openai:
        settings = discord_settings(fake, openai, streaming=False, send_budget_s=10.0)
        settings = replace(
            settings, discord=replace(settings.discord, api_base_url=f"http://127.0.0.1:{gate.port}/api/v10")
        )
        async with running_pipeline(settings, tmp_path) as pipeline, running_client(pipeline, settings):
            await fake.user_says(world.dm, world.member, "please answer through the outage")
            await openai.wait_requests(1, timeout=10)
            await gate.shut()  # Discord's REST API is gone while the model writes
            await wait_until(lambda: "failed (attempt 2)" in caplog.text, timeout=10, what="refused sends")
            assert fake.shown(world.dm) == []
            await gate.open()
            await fake.wait_for(lambda: fake.shown(world.dm), timeout=15)
            stats = await pipeline.memory.stats(f"discord:{world.dm['id']}")
        await gate.close()
    assert fake.shown(world.dm) == ["the answer written during the outage"]  # delivered once
    assert len(fake.sent_to(world.dm)) == 1
    assert stats["total_messages"] == 2


async def test_discord_down_past_the_budget_logs_keeps_memory_and_goes_on(
    fake_discord, openai, tmp_path, caplog
):
    fake = fake_discord
    world = World(fake)
    settings = discord_settings(fake, openai, streaming=False, send_budget_s=0.5)
    down = True
    fake.fail_next(
        lambda c: down and c.method == "POST" and c.path.endswith("/messages"), how="503", times=1000
    )
    async with running_pipeline(settings, tmp_path) as pipeline, running_client(pipeline, settings):
        await fake.user_says(world.dm, world.member, "an answer nobody will see")
        await wait_until(lambda: "giving up on this part" in caplog.text, timeout=15, what="the give-up line")
        down = False
        await fake.user_says(world.dm, world.member, "are you still there?")
        await fake.wait_for(lambda: fake.shown(world.dm), timeout=15)
        texts = await memory_texts(pipeline, f"discord:{world.dm['id']}", "answer nobody see still there")
    assert fake.shown(world.dm) == ["echo: Bob: are you still there?"]
    assert texts == [
        "an answer nobody will see",
        "echo: Bob: an answer nobody will see",
        "are you still there?",
        "echo: Bob: are you still there?",
    ]


# ----------------------------------------------------------------------------- models failing in turn


def rotating_faults(req) -> object:
    """Message i: the tiers fail in a pattern that rotates with i (429, 5xx, hang, garbage);
    every tenth message every tier fails; otherwise the attempt after the first (i % 3) * 2 answers."""
    text = str(req.messages[-1]["content"])
    i = int(text.split()[1])
    faults = [
        RateLimit(retry_after=0.01),
        ServerError(503),
        Hang(),
        Garbage(),
        ServerError(500),
        RateLimit(None),
    ]
    rotating_faults.seen[i] = n = rotating_faults.seen.get(i, 0) + 1
    if i % 10 == 9 or n <= (i % 3) * 2:  # two attempts per tier before the next one
        return faults[(i + n) % len(faults)]
    return Echo()


async def test_every_tier_failing_in_turn_over_50_messages_answers_or_apologises_and_records_every_attempt(
    tmp_path,
):
    rotating_faults.seen = {}
    async with FakeOpenAI() as fake:
        fake.responder = rotating_faults
        settings = make_settings(fake.url, request_timeout_s=0.5, time_budget_s=5.0)
        # The back-offs are decided but not waited: 150 attempts stay quick.
        async with running_pipeline(settings, tmp_path, options=INSTANT) as pipeline:
            replies: list[str] = []
            for i in range(50):
                m = msg(f"message {i} about the weather", message_id=f"w{i}")
                if i % 2:  # half streamed, half whole: both paths keep the count
                    replies.append("".join([piece async for piece in pipeline.stream(m)]))
                else:
                    replies.append((await pipeline.handle(m)).text)
            usage = await pipeline.memory.usage("test:chat")
            stats = await pipeline.memory.stats("test:chat")
    answered = [i for i, r in enumerate(replies) if r == f"echo: message {i} about the weather"]
    apologised = [i for i, r in enumerate(replies) if r == APOLOGY]
    assert sorted(answered + apologised) == list(range(50))  # every message: an answer or the apology
    assert apologised == [i for i in range(50) if i % 10 == 9]
    assert not any(CUT_OFF in r for r in replies)
    totals = tier_totals(usage)
    assert sum(calls for calls, _ in totals.values()) == len(fake.requests)  # one usage row per attempt
    assert sum(calls - errors for calls, errors in totals.values()) == len(answered)
    assert {r.action for r in fake.requests} >= {"RateLimit", "ServerError", "Hang", "Garbage", "Echo"}
    assert stats["total_messages"] == 50 + len(answered)  # each question once, each answer once


# ----------------------------------------------------------------------------- memory out of reach


async def test_memory_unreachable_mid_telegram_conversation_replays_without_doubles(tg, openai, tmp_path):
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    mem_dir = tmp_path / "memory"
    gate = TcpGate()  # the worker's address for the bot, whichever host is behind it
    worker = contextlib.AsyncExitStack()
    host = await worker.enter_async_context(EmbeddedMemoryHost(mem_dir, token=MEMORY_TOKEN, port=0))
    await gate.open(port_of(host.url))
    try:
        async with telegram_bot(
            telegram_settings(tg, openai, memory_url=gate.url), tg, tmp_path / "bot"
        ) as pipeline:
            for n in range(3):
                tg.send(chat, alice, f"note {n}: the sky is blue")
                await tg.wait_for_message(chat["id"], count=n + 1, timeout=15)
            assert len(pipeline.outbox) == 0
            await gate.shut()  # the worker goes away mid-conversation
            await worker.aclose()
            for n in range(3, 6):  # answers keep coming; the records wait in the outbox
                tg.send(chat, alice, f"note {n}: the sky is blue")
                await tg.wait_for_message(chat["id"], count=n + 1, timeout=15)
            # The last answer's record joins the outbox once its stream has ended.
            await wait_until(lambda: len(pipeline.outbox) == 6, timeout=15, what="6 records in the outbox")
            async with EmbeddedMemoryHost(mem_dir, token=MEMORY_TOKEN, port=0) as back:
                await gate.open(port_of(back.url))  # the worker is back, at the address the bot knows
                await wait_until(lambda: len(pipeline.outbox) == 0, timeout=15, what="outbox replay")
                for n in range(6, 8):
                    tg.send(chat, alice, f"note {n}: the sky is blue")
                    await tg.wait_for_message(chat["id"], count=n + 1, timeout=15)
                stats = await pipeline.memory.stats("telegram:111")
                texts = await memory_texts(pipeline, "telegram:111", "note sky blue")
                usage = tier_totals(await pipeline.memory.usage("telegram:111"))
    finally:
        await worker.aclose()
        await gate.close()
    expected = []
    for n in range(8):
        expected += [f"note {n}: the sky is blue", f"echo: Alice: note {n}: the sky is blue"]
    assert answers(tg, chat["id"]) == expected[1::2]  # every answer shown once, in order
    assert texts == expected  # every record landed once, in order
    assert stats["total_messages"] == 16
    assert sum(calls for calls, _ in usage.values()) == 8 == len(openai.requests)


# ----------------------------------------------------------------------------- graceful shutdown


async def _memory_stats(data_dir, chat: str) -> dict:
    """The stats of one chat in a stopped bot's embedded memory (opened again to look)."""
    from bot.chat.memory.client import HttpMemoryClient

    async with (
        EmbeddedMemoryHost(data_dir / "memory") as host,
        HttpMemoryClient(host.url, host.token) as memory,
    ):
        return await memory.stats(chat)


async def _chatbot(tmp_path, *args: str, **env: str) -> asyncio.subprocess.Process:
    """`chatbot ARGS` as a real process in `tmp_path` (no .env), output piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=clean_env(**env),
    )


async def test_sigterm_mid_answer_in_chat_finishes_it_and_records_it(tmp_path):
    answer = "The answer that was being written when SIGTERM came."
    async with FakeOpenAI(default=Answer(answer, delay=0.8)) as openai:
        proc = await _chatbot(
            tmp_path,
            "chat",
            "--data",
            str(tmp_path / "data"),
            "--chat",
            "console:grace",
            OPENAI_API_KEY="sk-test-sigterm-0123456789abcdef",
            OPENAI_BASE_URL=openai.url,
        )
        try:
            proc.stdin.write(b"please answer slowly\n")  # stdin stays open: only the signal ends the chat
            await proc.stdin.drain()
            await openai.wait_requests(1, timeout=60)
            proc.send_signal(signal.SIGTERM)  # mid-answer: the model is still writing
            async with asyncio.timeout(60):
                out, err = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
    assert proc.returncode == 0, err.decode()
    assert out.decode() == answer + "\n\n"
    stats = await _memory_stats(tmp_path / "data", "console:grace")
    assert stats["total_messages"] == 2  # the question and the answer both landed
    from bot.chat.memory.outbox import Outbox

    with Outbox(tmp_path / "data" / "outbox.sqlite3") as box:
        assert len(box) == 0


async def test_sigterm_mid_answer_in_telegram_finishes_it_and_logs_one_clean_line(tg, tmp_path):
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    answer = "The answer that was being written when SIGTERM came, in several chunks."
    api_key = "sk-test-sigterm-0123456789abcdef"
    async with FakeOpenAI(default=Answer(answer, chunk_size=8, delay=0.08)) as openai:
        proc = await _chatbot(
            tmp_path,
            "telegram",
            "--data",
            str(tmp_path / "data"),
            OPENAI_API_KEY=api_key,
            OPENAI_BASE_URL=openai.url,
            TELEGRAM_BOT_TOKEN=tg.token,
            TELEGRAM_API_BASE_URL=tg.base_url,
        )
        try:
            await tg.wait_until(lambda: tg.calls_to("getUpdates"), timeout=60)
            tg.send(chat, alice, "please answer slowly")
            await openai.wait_requests(1, timeout=30)
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):
                _, err = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
    log = err.decode()
    assert proc.returncode == 0, log
    assert answers(tg, chat["id"]) == [answer]  # finished, not cut off
    assert (await _memory_stats(tmp_path / "data", "telegram:111"))["total_messages"] == 2
    [turn] = [line for line in log.splitlines() if " turn chat=" in line]
    assert re.search(
        r"turn chat=telegram:111 req=[0-9a-f]{12} tier=\w+ latency_ms=\d+ ok=True memory=True exit=answered$",
        turn,
    )
    assert "please answer slowly" not in log and answer not in log  # no message text in logs
    assert tg.token not in log and api_key not in log  # httpx logs Bot API URLs: redacted
    assert "/bot[redacted]/getUpdates" in log


async def test_discord_stop_finishes_the_answer_in_hand_before_closing(fake_discord, tmp_path):
    from bot.adapters.discord import adapter

    fake = fake_discord
    world = World(fake)
    async with FakeOpenAI(default=Answer("Finished before the door closed.", delay=0.5)) as openai:
        settings = discord_settings(fake, openai, streaming=False, send_budget_s=5.0)
        stop = asyncio.Event()
        async with running_pipeline(settings, tmp_path) as pipeline:
            serving = asyncio.create_task(adapter.serve(pipeline, settings, stop=stop))
            await fake.wait_for(lambda: fake.identifies, timeout=15)
            await fake.user_says(world.dm, world.member, "answer me before you go")
            await openai.wait_requests(1, timeout=10)
            stop.set()  # what SIGTERM does in `chatbot discord`
            async with asyncio.timeout(15):
                await serving  # returns by itself: not cancelled
            stats = await pipeline.memory.stats(f"discord:{world.dm['id']}")
    assert fake.shown(world.dm) == ["Finished before the door closed."]
    assert stats["total_messages"] == 2


async def test_log_lines_name_chat_request_tier_latency_and_nothing_said(tmp_path, caplog):
    from bot.chat.logs import KeyValueFormatter
    from bot.jsonlog import JsonFormatter

    caplog.set_level(logging.INFO)
    async with (
        FakeOpenAI(default=Echo()) as openai,
        running_pipeline(make_settings(openai.url), tmp_path) as pipeline,
    ):
        await pipeline.handle(msg("a private thought about cheese", chat="test:logs"))
        await pipeline.handle(msg("another private thought", chat="test:logs"))
    turns = [r for r in caplog.records if r.getMessage().startswith("turn ")]
    assert len(turns) == 2 and turns[0].fields["request_id"] != turns[1].fields["request_id"]
    line = KeyValueFormatter("%(levelname)s %(name)s%(context)s %(message)s").format(turns[0])
    assert re.fullmatch(
        r"INFO bot\.chat\.pipeline turn chat=test:logs req=[0-9a-f]{12} tier=standard "
        r"latency_ms=\d+ ok=True memory=True exit=answered",
        line,
    )
    data = json.loads(JsonFormatter().format(turns[1]))
    assert (data["chat"], data["tier"], data["ok"], data["with_memory"]) == (
        "test:logs",
        "standard",
        True,
        True,
    )
    assert data["request_id"] == turns[1].fields["request_id"] and isinstance(data["latency_ms"], int)
    assert data["level"] == "info" and data["logger"] == "bot.chat.pipeline" and data["ts"].endswith("Z")
    assert "cheese" not in caplog.text and "private thought" not in caplog.text


async def test_sigterm_replays_the_outbox_into_a_worker_that_came_back(tmp_path):
    from bot.chat.memory.client import HttpMemoryClient

    mem_dir = tmp_path / "memory"
    gate = TcpGate()  # nothing behind it yet: the worker is down when the bot starts
    url = gate.url
    async with gate, FakeOpenAI(default=Echo()) as openai:
        proc = await _chatbot(
            tmp_path,
            "chat",
            "--data",
            str(tmp_path / "data"),
            "--chat",
            "console:grace",
            OPENAI_API_KEY="sk-test-sigterm-0123456789abcdef",
            OPENAI_BASE_URL=openai.url,
            MEMORY_URL=url,
            MEMORY_API_TOKEN=MEMORY_TOKEN,
        )
        try:
            proc.stdin.write(b"remember that I live in Oslo\n")
            await proc.stdin.drain()
            async with asyncio.timeout(60):
                first = await proc.stdout.readuntil(b"\n\n")  # answered without memory
            async with EmbeddedMemoryHost(mem_dir, token=MEMORY_TOKEN, port=0) as back:
                await gate.open(port_of(back.url))
                proc.send_signal(signal.SIGTERM)
                async with asyncio.timeout(60):
                    _, err = await proc.communicate()
                async with HttpMemoryClient(back.url, MEMORY_TOKEN) as memory:
                    stats = await memory.stats("console:grace")
                    facts = await memory.facts("console:grace")
        finally:
            if proc.returncode is None:
                proc.kill()
    assert proc.returncode == 0, err.decode()
    assert first == b"echo: remember that I live in Oslo\n\n"
    assert stats["total_messages"] == 2  # the question and the answer, replayed once each
    assert ("location", "Oslo") in {(f["key"], f["value"]) for f in facts}


async def test_lines_logged_while_a_message_is_handled_carry_its_chat_and_request(tmp_path, caplog):
    from bot.chat.logs import KeyValueFormatter

    caplog.set_level(logging.INFO)
    async with EmbeddedMemoryHost(tmp_path / "memory", token=MEMORY_TOKEN, port=0) as host:
        url = host.url  # closed again: the worker is out of reach
    async with FakeOpenAI(default=Echo()) as openai:
        settings = make_settings(openai.url, memory_url=url, memory_token=MEMORY_TOKEN)
        async with running_pipeline(settings, tmp_path / "bot") as pipeline:
            await pipeline.handle(msg("hello without memory", chat="test:ctx"))
    [turn] = [r for r in caplog.records if r.getMessage().startswith("turn ")]
    request_id = turn.fields["request_id"]
    # The outbox replay in the background may warn too, under its own context.
    [down] = [
        r
        for r in caplog.records
        if "memory worker unavailable" in r.getMessage() and getattr(r, "bot_request", None) == request_id
    ]
    assert (down.bot_chat, down.bot_request) == ("test:ctx", request_id)
    line = KeyValueFormatter("%(name)s%(context)s %(message)s").format(down)
    assert line.startswith(
        f"bot.chat.memory.gateway [chat=test:ctx req={request_id}] memory worker unavailable"
    )
    assert "memory=False" in turn.getMessage()


async def test_a_tier_pausing_for_a_short_retry_after_gets_a_last_try_before_the_apology(tmp_path):
    async with FakeOpenAI() as fake:
        fake.script(RateLimit(retry_after=0.3), RateLimit(retry_after=0.3), Echo(), model="m-standard")
        fake.script(ServerError(500), ServerError(500), model="m-light")
        fake.script(ServerError(500), ServerError(500), model="m-heavy")
        async with running_pipeline(make_settings(fake.url, max_retry_wait_s=1.0), tmp_path) as pipeline:
            reply = await pipeline.handle(msg("hello there, anyone?"))
            usage = tier_totals(await pipeline.memory.usage("test:chat"))
    assert reply.ok and reply.tier == "standard" and reply.text == "echo: hello there, anyone?"
    assert fake.models_called() == ["m-standard"] * 2 + ["m-light"] * 2 + ["m-heavy"] * 2 + ["m-standard"]
    assert usage == {"standard": (3, 2), "light": (2, 2), "heavy": (2, 2)}  # every attempt recorded
