"""The bot's own overhead per message: everything but the model's time, p50 and p99.

An instant in-process model answers, so what is measured is the pipeline itself: the
console adapter, the memory turn and reply over HTTP to the local memory host (embedded,
on 127.0.0.1, real SQLite under a temporary folder), tier choice, prompt building and
recording. Target: p50 <= 10 ms per message.

A second figure, over a fake OpenAI-compatible HTTP server that answers at once, shows the
same with the openai SDK and a real HTTP model call in the loop (that call's own time
subtracted, as reported per attempt). A third: the time to first visible text when
streaming, i.e. the delay the bot adds before the model's first token reaches the reader.

    .venv/bin/python benchmarks/pipeline.py [--messages 500] [--chats 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.adapters.console import ConsoleSession
from bot.app import build_pipeline
from bot.chat.models.base import ModelAnswer, ModelRequest
from bot.chat.options import PipelineOptions
from bot.config import load_settings, settings_from

SENTENCES = [
    "my name is Ada and I live in Lisbon",
    "what do you think about the weather this week",
    "I like green tea and long walks by the river",
    "can you remind me what I said about the train",
    "the meeting moved to Thursday afternoon",
    "where do I live again?",
    "tell me something about octopuses",
    "I am reading a book about the history of maps",
]


class InstantModel:
    """A model that answers at once: the benchmark measures the bot, not a model."""

    model = "instant"

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelAnswer:
        """A fixed short answer."""
        return ModelAnswer(text="Sure, noted.", model=self.model, prompt_tokens=50, completion_tokens=4)

    async def start_stream(self, request: ModelRequest, *, timeout: float):
        """A stream of three pieces, the first one ready at once."""
        return _Pieces(["Sure", ", ", "noted."])


class _Pieces:
    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces
        self.model = "instant"
        self.notice = ""  # an AnswerStream shows it before the answer
        self.prompt_tokens = 50
        self.completion_tokens = 4

    async def __aiter__(self) -> AsyncIterator[str]:
        for p in self.pieces:
            yield p

    async def aclose(self) -> None:
        """Nothing to release."""


class TimedMemory:
    """Wraps the memory client and times each call, to split the memory host's share out."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.spent_ms = 0.0

    def __getattr__(self, name: str):
        target = getattr(self.inner, name)
        if not callable(target):
            return target

        async def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return await target(*args, **kwargs)
            finally:
                self.spent_ms += (time.perf_counter() - started) * 1000

        return timed


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def line(label: str, values_ms: list[float]) -> str:
    """One result line."""
    return (
        f"{label:<58} n={len(values_ms):<5} p50={pct(values_ms, 50):6.2f} ms  "
        f"p99={pct(values_ms, 99):6.2f} ms  mean={statistics.fmean(values_ms):6.2f} ms"
    )


async def bench_console(data: Path, messages: int, chats: int) -> dict[str, list[float]]:
    """Console adapter -> router -> memory host over HTTP, with the instant model."""
    settings = load_settings(env={}, env_file=None)
    out: dict[str, list[float]] = {"handle": [], "first_text": [], "memory": [], "own": []}
    async with build_pipeline(
        settings, data, models={"standard": InstantModel()}, options=PipelineOptions()
    ) as router:
        timed_memory = TimedMemory(router.memory)
        router.memory = timed_memory  # type: ignore[assignment]  # a timing wrapper of the same client
        sessions = [ConsoleSession(router, f"console:bench{c}", data_dir=data) for c in range(chats)]
        for i in range(20):  # warm-up: connections, SQLite caches
            await sessions[0].answer(SENTENCES[i % len(SENTENCES)])
        for i in range(messages):
            session = sessions[i % chats]
            text = f"{SENTENCES[i % len(SENTENCES)]} ({i})"
            before = timed_memory.spent_ms
            started = time.perf_counter()
            answer = await session.answer(text)
            total = (time.perf_counter() - started) * 1000
            out["handle"].append(total)
            out["memory"].append(timed_memory.spent_ms - before)
            out["own"].append(total - (timed_memory.spent_ms - before))
            assert answer == "Sure, noted.", answer
        for i in range(messages // 2):
            session = sessions[i % chats]
            started = time.perf_counter()
            stream = router.stream(session.message(f"{SENTENCES[i % len(SENTENCES)]} [s{i}]"))
            first = await stream.__anext__()
            out["first_text"].append((time.perf_counter() - started) * 1000)
            assert first == "Sure"
            async for _ in stream:
                pass
        stats = await router.memory.stats(sessions[0].chat_key)
        out["_messages_in_chat0"] = [float(stats["total_messages"])]
    return out


async def bench_http_model(data: Path, messages: int) -> dict[str, list[float]]:
    """Same pipeline with the openai SDK calling a fake server on 127.0.0.1 that answers at once."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.fakes.openai_server import Answer, FakeOpenAI

    totals: list[float] = []
    overhead: list[float] = []
    async with FakeOpenAI(default=Answer("Sure, noted.")) as fake:
        data_toml = {
            "router": {"fallback_order": ["standard"], "default_tier": "standard"},
            "tiers": {
                "standard": {"model": "m-standard", "price_in_per_mtok": 0.4, "price_out_per_mtok": 1.6}
            },
        }
        settings = settings_from(data_toml, {"OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": fake.url})
        async with build_pipeline(settings, data, options=PipelineOptions()) as router:
            model_ms: list[float] = []
            original = router.model.models["standard"].complete

            async def timed(request, *, timeout):
                started = time.perf_counter()
                try:
                    return await original(request, timeout=timeout)
                finally:
                    model_ms.append((time.perf_counter() - started) * 1000)

            router.model.models["standard"].complete = timed  # type: ignore[method-assign]  # timing the model call in place
            session = ConsoleSession(router, "console:httpbench", data_dir=data)
            for i in range(20):
                await session.answer(SENTENCES[i % len(SENTENCES)])
            model_ms.clear()
            for i in range(messages):
                started = time.perf_counter()
                await session.answer(f"{SENTENCES[i % len(SENTENCES)]} ({i})")
                total = (time.perf_counter() - started) * 1000
                totals.append(total)
                overhead.append(total - model_ms[-1])
    return {"total": totals, "overhead": overhead}


async def bench_run_console(data: Path, messages: int) -> float:
    """The whole `chatbot chat` loop (stdin lines -> stdout answers) in-process: ms per message."""
    import io

    from bot.adapters.console import run_console

    settings = load_settings(env={}, env_file=None)
    lines = "".join(f"{SENTENCES[i % len(SENTENCES)]} ({i})\n" for i in range(messages))
    async with build_pipeline(settings, data, models={"standard": InstantModel()}) as router:
        out = io.StringIO()
        started = time.perf_counter()
        await run_console(router, "console:loop", stdin=io.StringIO(lines), stdout=out, interactive=False)
        elapsed = time.perf_counter() - started
    assert out.getvalue().count("Sure, noted.") == messages
    return elapsed * 1000 / messages


async def main() -> int:
    """Run the three measurements and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--chats", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
        root = Path(tmp)
        console = await bench_console(root / "a", args.messages, args.chats)
        http = await bench_http_model(root / "b", args.messages)
        loop_ms = await bench_run_console(root / "c", args.messages)
    print(
        f"bot pipeline overhead per message ({args.messages} messages over {args.chats} chats, "
        f"embedded memory host over HTTP on 127.0.0.1, python {sys.version.split()[0]})"
    )
    print(line("console adapter -> router -> memory (instant model)", console["handle"]))
    print(line("  of which: memory turn + reply over HTTP (host included)", console["memory"]))
    print(line("  of which: the bot's own code (adapter, router, prompt)", console["own"]))
    print(line("same, with openai SDK + fake HTTP model, model time removed", http["overhead"]))
    print(line("same, with openai SDK + fake HTTP model, total", http["total"]))
    print(line("streaming: time to first visible text (instant model)", console["first_text"]))
    print(f"{'whole chatbot chat loop (stdin -> stdout), mean per message':<58} {loop_ms:.2f} ms")
    p50 = pct(console["handle"], 50)
    print(
        f"target p50 <= 10 ms: {'met' if p50 <= 10 else 'NOT met'} ({p50:.2f} ms); "
        f"first text p50 <= 20 ms: {'met' if pct(console['first_text'], 50) <= 20 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
