"""What one answer sends to the model, per turn of a LoCoMo conversation: before and after
the prompt said each message once (issue 21, item 1).

    .venv/bin/python benchmarks/prompt_size.py [--data ../shared/locomo/locomo-dev.json] [--conv 0]

Every turn of the conversation goes through the real memory engine (`ChatMemory` over
SQLite in a temp folder, compaction with the offline summarizer when due, as the embedded
host does), in mode `auto` (4 recent messages) and `full` (12). For each turn the model's
messages are built twice, in the same run:
- before: the builder of the commit before this change, kept below (`before_messages`): the
  memory prompt with its "Recent messages" section, and the same recent messages again as
  chat turns;
- after: `bot.chat.prompt.build_messages`, where the recent messages are chat turns only
  and the memory block carries the rest.
Figures: characters of all message contents per turn (mean, p50, p90, total) and approximate
tokens (characters / 4, the usual rule of thumb for English text), and the ratio. Last, a
small context window (`--window` tokens) shows what each builder drops first under pressure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from locomo_recall import load, turns  # noqa: E402  (the same reading of LoCoMo)

from bot.chat.models.base import MemoryContext  # noqa: E402
from bot.chat.prompt import SYSTEM_INSTRUCTION, build_messages, quote_memory  # noqa: E402
from memory_engine import ChatMemory  # noqa: E402
from memory_engine.compaction.compact import compact_once  # noqa: E402
from memory_engine.compaction.offline import offline_summarize  # noqa: E402
from memory_engine.prompt import HEADER  # noqa: E402
from memory_worker.local import SqliteStorage  # noqa: E402

DEFAULT_DATA = (
    next(
        (p for p in (ROOT.parent / "shared/locomo", ROOT.parent.parent / "shared/locomo") if p.is_dir()),
        ROOT.parent / "shared/locomo",
    )
    / "locomo-dev.json"
)
CHARS_PER_TOKEN = 4


# -- the builder before this change (bot/chat/prompt.py and memory_engine/prompt.py) -------


def _old_line(msg: Mapping[str, Any]) -> str:
    who = "assistant" if msg["role"] == "assistant" else " ".join(str(msg.get("author") or "").split())[:64]
    ts = str(msg.get("ts") or "")[:16].replace("T", " ")
    return f"- [{ts}] {who or msg['role']}: {json.dumps(msg['text'], ensure_ascii=False)}"


def before_memory_prompt(prompt_without_recent: str, recent: Iterable[Mapping[str, Any]]) -> str:
    """The old memory prompt: the header, then "Recent messages", then the rest as now."""
    recent = list(recent)
    if not recent:
        return prompt_without_recent
    rest = prompt_without_recent[len(HEADER) :]
    return HEADER + "\n\nRecent messages:\n" + "\n".join(_old_line(m) for m in recent) + rest


def before_messages(
    *, text: str, author: str, memory_prompt: str | None, recent: Iterable[Mapping[str, Any]], group: bool
) -> list[dict[str, str]]:
    """The old `build_messages` (no context pressure: the shipped tiers have 128k tokens)."""
    turns_: list[dict[str, str]] = []
    for m in recent:
        content = str(m.get("text") or "")
        if m.get("role") == "assistant":
            turns_.append({"role": "assistant", "content": content})
        elif content:
            who = str(m.get("author") or "")
            turns_.append({"role": "user", "content": f"{who}: {content}" if group and who else content})
    head = [{"role": "system", "content": SYSTEM_INSTRUCTION}]
    if memory_prompt:
        head.append({"role": "system", "content": quote_memory(memory_prompt)})
    return [*head, *turns_, {"role": "user", "content": f"{author}: {text}" if group else text}]


def before_fit(
    messages: list[dict[str, str]], memory_prompt: str, n_turns: int, max_chars: int
) -> tuple[int, bool]:
    """What the old builder kept under `max_chars`: (recent turns kept, memory cut?)."""
    fixed = len(messages[0]["content"]) + len(messages[-1]["content"])
    turns_ = [m["content"] for m in messages[-1 - n_turns : -1]] if n_turns else []
    while turns_ and fixed + len(memory_prompt) + sum(map(len, turns_)) > max_chars:
        turns_.pop(0)
    room = max_chars - fixed - sum(map(len, turns_)) - 200
    return len(turns_), len(memory_prompt) > room


# -- the run ----------------------------------------------------------------------------------


def context_of(got: Mapping[str, Any]) -> MemoryContext:
    """The bot's MemoryContext of a turn answer (as the gateway builds it)."""
    return MemoryContext(
        prompt=got["prompt"],
        recent=tuple(got["recent"]),
        retrieved=tuple(got["retrieved"]),
        facts=tuple(got["facts"]),
        summary=got["summary"] or "",
        notes=tuple(got.get("notes") or ()),
        topic_started_at=got.get("topic_started_at"),
    )


def size(messages: Iterable[Mapping[str, Any]]) -> int:
    """Characters of every message's content."""
    return sum(len(str(m["content"])) for m in messages)


async def measure(conversation: list[dict[str, Any]], mode: str, window_tokens: int) -> dict[str, Any]:
    """Build both prompts for every turn of one conversation in one memory mode."""
    before: list[int] = []
    after: list[int] = []
    twice = {"before": 0, "after": 0, "recent": 0}
    pressure = {"before_turns": 0, "after_turns": 0, "before_cut": 0, "after_dropped": {}}
    window_chars = window_tokens * 3 * 3 // 4  # as the pipeline: ~3 chars a token, 1/4 for the answer
    with tempfile.TemporaryDirectory() as tmp:
        memory = ChatMemory(SqliteStorage(Path(tmp) / "chat.sqlite3"))
        for t in conversation:
            got = memory.turn(t["text"], t["author"], t["author"], t["message_id"], mode=mode)
            if memory.needs_compaction():
                await compact_once(memory, offline_summarize)
            old_prompt = before_memory_prompt(got["prompt"], got["recent"])
            old = before_messages(
                text=t["text"], author=t["author"], memory_prompt=old_prompt, recent=got["recent"], group=True
            )
            new = build_messages(text=t["text"], author=t["author"], memory=context_of(got), group=True)
            before.append(size(old))
            after.append(size(new.messages))
            # A recent message (long enough not to be found inside another) sent more than once.
            long_enough = [m["text"] for m in got["recent"] if len(m["text"]) >= 20]
            twice["recent"] += len(long_enough)
            for name, msgs in (("before", old), ("after", new.messages)):
                sent = "\n".join(str(m["content"]) for m in msgs)
                twice[name] += sum(sent.count(text) > 1 for text in long_enough)
            kept, cut = before_fit(old, old_prompt, len(got["recent"]), window_chars)
            pressure["before_turns"] += kept
            pressure["before_cut"] += cut
            small = build_messages(
                text=t["text"], author=t["author"], memory=context_of(got), group=True, max_chars=window_chars
            )
            pressure["after_turns"] += small.turns
            for what in small.dropped:
                pressure["after_dropped"][what] = pressure["after_dropped"].get(what, 0) + 1
    return {"before": before, "after": after, "twice": twice, "pressure": pressure}


def _row(name: str, values: list[int]) -> str:
    q = statistics.quantiles(values, n=10)
    mean = statistics.fmean(values)
    return (
        f"| {name} | {mean:,.0f} | {statistics.median(values):,.0f} | {q[8]:,.0f} | {sum(values):,} "
        f"| {mean / CHARS_PER_TOKEN:,.0f} |"
    )


def main() -> int:
    """Print the prompt sizes per turn, before and after, for each memory mode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conv", type=int, default=0, help="which conversation of the file")
    parser.add_argument("--window", type=int, default=1500, help="small context window, tokens")
    args = parser.parse_args()
    conversation = turns(load(args.data)[args.conv])
    print(f"LoCoMo conversation {args.conv} of {args.data.name}: {len(conversation)} turns\n")
    for mode in ("auto", "full"):
        r = asyncio.run(measure(conversation, mode, args.window))
        print(f"mode {mode}: characters sent to the model per turn (tokens ~ characters / {CHARS_PER_TOKEN})")
        print("| builder | mean | p50 | p90 | total | ~tokens per turn (mean) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        print(_row("before (recent twice)", r["before"]))
        print(_row("after (each once)", r["after"]))
        ratio = sum(r["after"]) / sum(r["before"])
        print(f"after / before: {ratio:.3f} ({(1 - ratio) * 100:.1f}% fewer characters)")
        tw = r["twice"]
        print(
            f"recent messages (of >= 20 chars) sent more than once: before {tw['before']} of "
            f"{tw['recent']}, after {tw['after']} of {tw['recent']}"
        )
        p, n = r["pressure"], len(conversation)
        dropped = ", ".join(f"{k} x{v}" for k, v in sorted(p["after_dropped"].items())) or "nothing"
        print(
            f"under a {args.window}-token window: recent turns kept per turn before "
            f"{p['before_turns'] / n:.2f}, after {p['after_turns'] / n:.2f}; memory cut before in "
            f"{p['before_cut']} of {n} turns; after dropped: {dropped}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
