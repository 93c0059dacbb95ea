"""Offline answer accuracy: questions about every person of imported group chats, no API key.

    .venv/bin/python benchmarks/offline_answers.py [--verbose] [--data PATH]

Each chat of tests/data/offline_chats.json becomes a Telegram Desktop or DiscordChatExporter
export, goes through `chatbot import` into a fresh embedded memory, then `chatbot chat` (the
console, the offline model: no OPENAI_API_KEY) is asked the chat's questions in one session,
after the console's own lines (a `/remember` note). An answer is right when it holds every
expected piece (the value and whose it is), case-folded; an "UNKNOWN" question is right when
the answer says it does not know. The baseline is the same run with the offline model of
`main` (`--baseline-ref`), so the figures sit side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "offline_chats.json"
NOTICES = ("I'm offline:", "(offline:")
UNKNOWN_MARK = "don't know"


def load(path: Path = DATA) -> list[dict[str, Any]]:
    """The chats: platform, people, messages, console lines, questions."""
    return list(json.loads(path.read_text(encoding="utf-8"))["chats"])


def _telegram(chat: dict[str, Any]) -> dict[str, Any]:
    messages = []
    for i, (uid, text) in enumerate(chat["messages"], start=1):
        unix = 1_700_000_000 + 60 * i
        messages.append(
            {
                "id": i,
                "type": "message",
                "date": "2023-11-14T22:13:20",
                "date_unixtime": str(unix),
                "from": chat["people"][uid],
                "from_id": f"user{uid}",
                "text": text,
                "text_entities": [{"type": "plain", "text": text}],
            }
        )
    return {"name": chat["name"], "type": "private_supergroup", "id": chat["id"], "messages": messages}


def _discord(chat: dict[str, Any]) -> dict[str, Any]:
    messages = []
    for i, (uid, text) in enumerate(chat["messages"], start=1):
        name = chat["people"][uid]
        author = {"id": uid, "name": name.lower(), "discriminator": "0000", "nickname": name, "isBot": False}
        messages.append(
            {
                "id": str(1_100_000_000_000_000_000 + i),
                "type": "Default",
                "timestamp": f"2024-03-01T10:{i:02d}:00+00:00",
                "content": text,
                "author": author,
                "attachments": [],
                "embeds": [],
                "stickers": [],
                "reactions": [],
                "mentions": [],
            }
        )
    return {
        "guild": {"id": "4001", "name": chat["name"]},
        "channel": {"id": chat["id"], "type": "GuildTextChat", "name": "general"},
        "messages": messages,
    }


def chat_key(chat: dict[str, Any]) -> str:
    """The key the import gives the chat (a Telegram supergroup is -(10**12 + id), "-100" and the id)."""
    if chat["platform"] == "telegram":
        return f"telegram:{-(10**12 + int(chat['id']))}"
    return f"discord:{chat['id']}"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORY_", "BOT_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "memory_worker" / "src")])
    return env


Cli = Callable[[list[str], str], tuple[int, str, str]]


def run_chatbot(args: list[str], stdin: str, cwd: Path = ROOT) -> tuple[int, str, str]:
    """`chatbot ARGS` as a child process fed `stdin`: (status, stdout, stderr)."""
    run = subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=120,
    )
    return run.returncode, run.stdout, run.stderr


def answers(chat: dict[str, Any], folder: Path, cwd: Path = ROOT, cli: Cli | None = None) -> list[str]:
    """Import the chat's export, then ask its questions in one console session; the answers in order.

    `cli` runs the `chatbot` command (default: a child process in `cwd`; the tests run it in process).
    """
    cli = cli or (lambda args, stdin: run_chatbot(args, stdin, cwd))
    export = folder / f"{chat['platform']}.json"
    build = _telegram if chat["platform"] == "telegram" else _discord
    export.write_text(json.dumps(build(chat), ensure_ascii=False), encoding="utf-8")
    data = folder / "data"
    code, _, err = cli(["import", chat["platform"], str(export), "--data", str(data)], "")
    if code != 0:
        raise RuntimeError(f"import failed: {err}")
    lines = [*chat.get("console", []), *(q for q, _ in chat["questions"])]
    code, out, err = cli(["chat", "--data", str(data), "--chat", chat_key(chat)], "\n".join(lines) + "\n")
    if code != 0:
        raise RuntimeError(f"chat failed: {err}")
    replies = [
        " ".join(line for line in block.splitlines() if not line.startswith(NOTICES)).strip()
        for block in out.split("\n\n")
        if block.strip()
    ]
    return replies[-len(chat["questions"]) :]


def right(answer: str, expected: list[str] | str) -> bool:
    """An answer holds every expected piece; "UNKNOWN": it says it does not know."""
    if expected == "UNKNOWN":
        return UNKNOWN_MARK in answer.casefold()
    return all(piece.casefold() in answer.casefold() for piece in expected)


def score(chats: list[dict[str, Any]], cwd: Path = ROOT) -> dict[str, Any]:
    """Accuracy over every question of every chat, per chat and in all, with each answer."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="offline_answers_") as tmp:
        for n, chat in enumerate(chats):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            for (question, expected), answer in zip(
                chat["questions"], answers(chat, folder, cwd), strict=True
            ):
                rows.append(
                    {
                        "chat": chat["name"],
                        "question": question,
                        "expected": expected,
                        "answer": answer,
                        "right": right(answer, expected),
                    }
                )
    per_chat = {
        c["name"]: sum(r["right"] for r in rows if r["chat"] == c["name"]) / len(c["questions"])
        for c in chats
    }
    return {"accuracy": sum(r["right"] for r in rows) / len(rows), "per_chat": per_chat, "rows": rows}


def _checkout(ref: str, into: Path) -> Path:
    """The files of `ref` in a temporary folder (`git archive`: no worktree is registered)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main(argv: list[str] | None = None) -> int:
    """Print the accuracy of this branch (and of the baseline) on the chats."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--baseline-ref", default="main", help="'' for no baseline")
    parser.add_argument("--verbose", action="store_true", help="every question with its answer")
    args = parser.parse_args(argv)
    chats = load(args.data)
    runs = {"this branch": ROOT}
    tmp = Path(tempfile.mkdtemp(prefix="offline_baseline_"))
    if args.baseline_ref:
        runs = {f"{args.baseline_ref} (baseline)": _checkout(args.baseline_ref, tmp / "tree"), **runs}
    try:
        total = sum(len(c["questions"]) for c in chats)
        print(f"{len(chats)} imported group chats, {total} questions about their people\n")
        print("| offline model | " + " | ".join(c["name"] for c in chats) + " | all |")
        print("| --- |" + " ---: |" * (len(chats) + 1))
        results = {}
        for name, tree in runs.items():
            res = score(chats, cwd=tree) if tree == ROOT else _score_in(tree, chats)
            results[name] = res
            cells = " | ".join(f"{res['per_chat'][c['name']]:.2f}" for c in chats)
            print(f"| {name} | {cells} | {res['accuracy']:.2f} |")
        if args.verbose:
            for r in results["this branch"]["rows"]:
                mark = "ok " if r["right"] else "BAD"
                print(f"{mark} [{r['chat']}] {r['question']}\n      -> {r['answer']}")
    finally:
        # `_checkout` extracts an archive (no worktree is registered): the folder is all there is.
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _score_in(tree: Path, chats: list[dict[str, Any]]) -> dict[str, Any]:
    """The score with another checkout's code (its bot and engine on the path)."""
    saved = os.environ.get("PYTHONPATH")
    global ROOT
    root, ROOT = ROOT, tree
    try:
        return score(chats, cwd=tree)
    finally:
        ROOT = root
        if saved is not None:
            os.environ["PYTHONPATH"] = saved


if __name__ == "__main__":
    sys.exit(main())
