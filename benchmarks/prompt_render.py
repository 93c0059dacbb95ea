"""What the engine's memory prompt costs a turn: rendering it, storing it, sending it.

    .venv/bin/python benchmarks/prompt_render.py --data ../shared/locomo/locomo-dev.json

The bot builds the prompt the model sees from the turn's parts (bot/chat/prompt.py); the
engine renders one too, answers it as the turn's `prompt` and keeps it as `last_prompt`
(`GET /stats`, which `/why` reads after a restart). In process, on one chat of N LoCoMo
messages with a summary, each of T turns is timed whole, then its prompt is rendered again
from the turn's own parts (`render_prompt`, the least of 5 runs) and stored again
(`set_state("last_prompt")` in its own transaction, the least of 5). Reported: p50 and mean
of each, their ratio to the turn, and the prompt's share of the turn answer's JSON bytes.
Then the bot's side: `build_messages` for the same turn with the engine's prompt (reused when
nothing is cut) and without it (rendered again from the parts, as it always was).
All figures come from this one run: compare ratios, not milliseconds, across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from latency_corpus import Corpus, percentile

from bot.chat.models.base import MemoryContext
from bot.chat.prompt import build_messages
from memory_engine import ChatMemory
from memory_engine.compaction.compact import compact_once, offline_summarize
from memory_engine.prompt import render_prompt
from memory_worker.local import SqliteStorage

# build_messages as the pipeline calls it for a group chat and a 128k-token window.
BOT = {"group": True, "max_chars": 128_000 * 3 * 3 // 4}


def _least(fn, runs: int = 5) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _build(text: str, author: str, memory: MemoryContext) -> object:
    return build_messages(text=text, author=author, memory=memory, **BOT)  # type: ignore[arg-type]


def _store(memory: ChatMemory, prompt: str) -> None:
    memory.sql.transaction(lambda: memory.set_state("last_prompt", prompt))


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="LoCoMo JSON (e.g. ../shared/locomo/locomo-dev.json)")
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--db", default=":memory:")
    args = ap.parse_args(argv)
    corpus = Corpus(args.data)
    memory = ChatMemory(SqliteStorage(args.db), retention=10 * args.messages)
    memory.import_messages(corpus.take(args.messages, "imp"))  # type: ignore[arg-type]
    for _ in range(3):  # a summary, as a chat past its first compactions has
        asyncio.run(compact_once(memory, offline_summarize, force=True))
    turn_ms, render_ms, store_ms, shares = [], [], [], []
    bot_reused, bot_rendered = [], []
    for m in corpus.take(args.turns, "live"):
        started = time.perf_counter()
        answer = memory.turn(
            m["text"], author=m["author"], author_id=m["author_id"], message_id=m["message_id"]
        )
        turn_ms.append((time.perf_counter() - started) * 1000)

        def render(a=answer) -> str:  # type: ignore[no-untyped-def]
            return render_prompt(a["retrieved"], a["summary"], a["facts"], a["notes"], a["topic_started_at"])

        assert render() == answer["prompt"]  # the same prompt the turn rendered
        render_ms.append(_least(render))
        prompt = answer["prompt"]
        store_ms.append(
            _least(lambda p=prompt: memory.sql.transaction(lambda: memory.set_state("last_prompt", p)))
        )
        context = MemoryContext.of(answer)
        for mem, out in ((context, bot_reused), (dataclasses.replace(context, prompt=""), bot_rendered)):
            out.append(_least(lambda mem=mem, text=m["text"], who=m["author"]: _build(text, who, mem)))
        whole = len(json.dumps(answer, ensure_ascii=False).encode())
        shares.append(len(json.dumps(prompt, ensure_ascii=False).encode()) / whole)
    p50_turn, mean_turn = percentile(turn_ms, 50), statistics.mean(turn_ms)
    print(f"chat of {args.messages} messages, {args.turns} turns, in process")
    print(f"turn              p50 {p50_turn:7.3f} ms   mean {mean_turn:7.3f} ms")
    for name, values in (("render_prompt", render_ms), ("store last_prompt", store_ms)):
        p50, mean = percentile(values, 50), statistics.mean(values)
        print(
            f"{name:<18}p50 {p50:7.3f} ms   mean {mean:7.3f} ms   "
            f"ratio to the turn p50 {p50 / p50_turn:6.1%}   mean {mean / mean_turn:6.1%}"
        )
    print(f"prompt's share of the answer's JSON bytes: p50 {percentile(shares, 50):.1%}")
    reused, rendered = percentile(bot_reused, 50), percentile(bot_rendered, 50)
    print(
        f"bot build_messages p50: {reused:.3f} ms with the engine's prompt, {rendered:.3f} ms rendering it "
        f"from the parts ({rendered / reused:.2f}x; {(rendered - reused) / p50_turn:.1%} of the turn p50)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
