"""The composition root: settings in, every client opened once with `async with`, passed in.

`build_pipeline(settings, data_dir)` yields the `ChatService` every adapter uses. Without
`MEMORY_URL` it starts the embedded memory host on 127.0.0.1 under `data_dir/memory`
(the same layout as `chatbot memory serve --data DIR/memory`); the outbox lives in
`data_dir/outbox.sqlite3`. `run_chat`, `run_telegram` and `run_discord` are what the
`chatbot` command calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.chat import logs
from bot.chat.chats import ChatState
from bot.chat.media import OpenAICompatTranscriber, Transcriber
from bot.chat.memory.client import HttpMemoryClient, MemoryClient
from bot.chat.memory.outbox import Outbox
from bot.chat.models.base import ChatModel
from bot.chat.models.offline import OfflineModel
from bot.chat.models.openai_compat import OpenAICompatModel
from bot.chat.models.tiers import rank_tiers
from bot.chat.options import Answering, PipelineOptions
from bot.chat.pipeline import Pipeline
from bot.chat.proactive.delivery import ReminderDesk
from bot.config import Settings, Tier, load_settings
from bot.shutdown import CLOSE_S, run_until_signalled

log = logging.getLogger(__name__)

OFFLINE_TIER = Tier(name="offline", model="offline")
OFFLINE_SUMMARY = "offline"  # SUMMARY_MODEL value: summarize without a model


async def _open_models(
    settings: Settings, stack: contextlib.AsyncExitStack
) -> tuple[dict[str, ChatModel], dict[str, Tier]]:
    """One AsyncOpenAI client per endpoint (base URL + key), shared by the tiers on it."""
    clients: dict[tuple[str | None, str], Any] = {}
    models: dict[str, ChatModel] = {}
    tiers: dict[str, Tier] = {}
    for name, tier in settings.tiers.items():
        if not tier.api_key:
            continue  # a tier without a key cannot answer; the others still can
        key = (tier.base_url, tier.api_key)
        client = clients.get(key)
        if client is None:
            from openai import AsyncOpenAI  # ~1 s to import: only when a model is configured

            # max_retries=0: the tier fallback retries, so every attempt is seen and recorded.
            client = AsyncOpenAI(
                api_key=tier.api_key,
                base_url=tier.base_url,
                max_retries=0,
                timeout=settings.router.request_timeout_s,
            )
            stack.push_async_callback(client.close)
            clients[key] = client
        models[name] = OpenAICompatModel(client, tier.model)
        tiers[name] = tier
    return models, tiers


def summary_endpoint(settings: Settings) -> tuple[str, str, str | None] | None:
    """(base URL, model, API key) the embedded memory summarizes with, or None: offline.

    The cheapest tier with a key, unless SUMMARY_* say otherwise (each overrides its part);
    SUMMARY_MODEL=offline keeps the offline summarizer whatever models are configured.
    """
    if settings.summary_model == OFFLINE_SUMMARY:
        return None
    keyed = {name: tier for name, tier in settings.tiers.items() if tier.api_key}
    cheapest = settings.tiers[rank_tiers(keyed)[0]] if keyed else None
    # A tier's base_url is resolved by the settings ([summary] openai_base_url, BOT_CONFIG's too).
    base = settings.summary_base_url or (cheapest and cheapest.base_url)
    model = settings.summary_model or (cheapest and cheapest.model)
    if not base or not model:
        return None  # no model configured: offline stays offline
    return base, model, settings.summary_api_key or (cheapest.api_key if cheapest else None)


async def _open_transcriber(settings: Settings, stack: contextlib.AsyncExitStack) -> Transcriber | None:
    """The speech-to-text client of [transcription] (None without a key: voice is refused plainly)."""
    t = settings.transcription
    if not t.api_key:
        return None
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=t.api_key, base_url=t.base_url, max_retries=0, timeout=t.timeout_s)
    stack.push_async_callback(client.close)
    return OpenAICompatTranscriber(client, t.model)


@contextlib.asynccontextmanager
async def build_pipeline(
    settings: Settings,
    data_dir: Path,
    *,
    models: Mapping[str, ChatModel] | None = None,
    options: PipelineOptions | None = None,
    clock: Callable[[], datetime] | None = None,
    memory: MemoryClient | None = None,
) -> AsyncIterator[Pipeline]:
    """Open memory (embedded host or MEMORY_URL), outbox and models; yield the pipeline (a ChatService).

    `models` replaces the configured models (tests, benchmarks): tier name -> ChatModel;
    `clock` (UTC now) replaces the clock of the daily caps, and of the embedded memory host;
    `memory` replaces the memory worker (tests: the engine in process).
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    async with contextlib.AsyncExitStack() as stack:
        if memory is not None:
            url, token = "", ""
        elif settings.memory_url is None:
            from memory_worker.local import EmbeddedMemoryHost

            base, model, key = summary_endpoint(settings) or (None, None, None)
            host = await stack.enter_async_context(
                EmbeddedMemoryHost(
                    data_dir / "memory",
                    summary_base_url=base,
                    summary_model=model,
                    summary_api_key=key,
                    clock=clock,
                    # By the time it closes, the bot's own requests are done or kept in the outbox.
                    shutdown_timeout_s=CLOSE_S,
                )
            )
            url, token = host.url, host.token
        else:
            url, token = settings.memory_url, settings.memory_token or ""
        # From here on no log record carries a secret, whichever library writes it.
        stack.callback(logs.install((*settings.secrets(), token or "")))
        client: MemoryClient = (
            memory
            if memory is not None
            else await stack.enter_async_context(
                HttpMemoryClient(url, token, timeout=settings.memory.timeout_s)
            )
        )
        outbox = stack.enter_context(Outbox(data_dir / "outbox.sqlite3"))
        # The gateway's replay task runs while the pipeline is in use; closing it flushes once more.
        options = options or PipelineOptions.from_settings(settings.memory)
        gateway = await stack.enter_async_context(options.gateway(client, outbox))

        offline = False
        if models is not None:
            chosen = dict(models)
            tiers = {n: settings.tiers.get(n) or Tier(name=n, model=m.model) for n, m in chosen.items()}
        else:
            chosen, tiers = await _open_models(settings, stack)
        if not chosen:
            offline = True
            chosen, tiers = {"offline": OfflineModel()}, {"offline": OFFLINE_TIER}
        transcriber = None if offline else await _open_transcriber(settings, stack)
        fallback = [t for t in settings.router.fallback_order if t in tiers] or list(tiers)
        default = settings.router.default_tier if settings.router.default_tier in tiers else fallback[0]
        reminders = ReminderDesk(client, data_dir, settings.reminders, clock, settings.limits)
        pipeline = Pipeline(
            memory=gateway,
            reminders=reminders,
            answering=Answering(
                chosen,
                tiers,
                fallback_order=tuple(fallback),
                default_tier=default,
                offline=offline,
                transcriber=transcriber,
                sleep=options.sleep,
            ),
            settings=settings,
            chats=ChatState(),
            secrets=(*settings.secrets(), token or ""),
            clock=clock,
        )
        # First on the way out: records still being written (a stream's last attempt) land
        # through the gateway, or in its outbox, before the gateway and the outbox close.
        stack.push_async_callback(pipeline.drain, CLOSE_S)
        # Due reminders: each adapter starts a courier for its platform's chats; they stop
        # before anything else closes (a send in hand is recorded first).
        stack.push_async_callback(reminders.stop)
        yield pipeline


def _say_dashboard(client: object) -> None:
    """Where the memory's dashboard is: a one-time owner's link (printed on stderr, as the other notes)."""
    from bot.chat.memory.client import HttpMemoryClient

    link = client.dashboard_link(minutes=60) if isinstance(client, HttpMemoryClient) else None
    if link:
        print(f"dashboard (one-time link, 60 minutes): {link}", file=sys.stderr)


def run_chat(data_dir: Path, chat_key: str, speaker: str | None = None) -> int:
    """`chatbot chat`: the console adapter on an embedded (or MEMORY_URL) memory.

    `speaker` (`--as NAME`): speak as that person of the chat, found by name or id (bot/speakers.py).
    Ctrl-C ends it at once (status 130); SIGTERM (a service manager, `docker stop`) lets the
    answer being made finish first, within bot/shutdown.py's grace.
    """
    from bot.adapters.console import run_console
    from bot.speakers import Speaker, SpeakerNotFound, find_speaker

    settings = load_settings()

    async def main(stop: asyncio.Event) -> int:
        async with build_pipeline(settings, data_dir) as pipeline:
            who: Speaker | None = None
            if speaker is not None:
                try:
                    who = await find_speaker(pipeline.memory.export(chat_key), chat_key, speaker)
                except SpeakerNotFound as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    return 2
                print(f"speaking as {who.author} (id {who.author_id}) in {chat_key}", file=sys.stderr)
            _say_dashboard(pipeline.memory.client)
            return await run_console(
                pipeline,
                chat_key,
                data_dir=data_dir,
                offline=pipeline.offline,
                streaming=settings.console.streaming,
                stop=stop,
                author=who.author if who else None,
                author_id=who.author_id if who else None,
            )

    return run_until_signalled(main, sigint_at_once=True, sigint_rc=130)


def run_telegram(data_dir: Path) -> int:
    """`chatbot telegram`: serve the Telegram bot until interrupted (SIGINT or SIGTERM)."""
    settings = load_settings()

    async def main(stop: asyncio.Event) -> None:
        from bot.adapters.telegram import adapter as telegram

        async with build_pipeline(settings, data_dir) as pipeline:
            await telegram.serve(
                pipeline,
                settings,
                stop=stop,
                webhook_listen=settings.telegram.webhook_listen,
                webhook_port=settings.telegram.webhook_port,
            )

    return run_until_signalled(main)


def run_discord(data_dir: Path) -> int:
    """`chatbot discord`: serve the Discord bot until interrupted (SIGINT or SIGTERM)."""
    settings = load_settings()

    async def main(stop: asyncio.Event) -> None:
        from bot.adapters.discord import adapter as discord

        async with build_pipeline(settings, data_dir) as pipeline:
            await discord.serve(pipeline, settings, stop=stop)

    return run_until_signalled(main)
