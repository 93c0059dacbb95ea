"""Group chats as people write them: questions answered offline and the facts /facts lists.

    .venv/bin/python benchmarks/group_chats.py [--split blind|dev|all] [--as telegram|discord]
        [--baseline-ref REF] [--verbose] [--write-exports]

Each chat of tests/data/group_chats/{blind,dev}.json (lowercase, typos, slang, several people at
once, jokes, corrections, facts in passing, names from many languages) becomes a Telegram Desktop
export (result.json) or a DiscordChatExporter export (replies, mentions, handles that differ from
display names), goes through `chatbot import` into a fresh embedded memory (the real import path
into the local host), then `chatbot chat` (the console, the offline model: no OPENAI_API_KEY) is
asked the chat's questions and `/facts` in one session.

A question is right when the answer holds every expected piece (case- and accent-folded);
wrong when it answers something else; don't-know when it says it does not know a question the
chat answers; invented when it answers a question the chat has no answer for ("UNKNOWN").
A labelled fact is found when `/facts` lists, under that person, a line holding its value; a trap
is stored when a line under that person holds the trap's value. Figures per question kind.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import unicodedata
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "group_chats"

_spec = importlib.util.spec_from_file_location("offline_answers", ROOT / "benchmarks" / "offline_answers.py")
assert _spec and _spec.loader
oa = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("offline_answers", oa)
_spec.loader.exec_module(oa)


def fold(text: str) -> str:
    """Case- and accent-folded text (ł and ø kept apart from their bases by NFKD: mapped here)."""
    text = text.casefold().translate(str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ß": "ss", "æ": "ae"}))
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def load(split: str) -> list[dict[str, Any]]:
    """The chats of a split ("blind", "dev" or "all"), each marked with its split."""
    names = ["blind", "dev"] if split == "all" else [split]
    chats = []
    for name in names:
        path = DATA / f"{name}.json"
        if not path.exists():
            continue
        for chat in json.loads(path.read_text(encoding="utf-8"))["chats"]:
            chats.append({**chat, "split": name})
    return chats


def _messages(chat: dict[str, Any]) -> list[tuple[int, str, str, int | None]]:
    """(index from 1, author id, text, index replied to or None)."""
    out = []
    for i, row in enumerate(chat["messages"], start=1):
        out.append((i, str(row[0]), str(row[1]), int(row[2]) if len(row) > 2 else None))
    return out


def telegram_export(chat: dict[str, Any]) -> dict[str, Any]:
    """The chat as a Telegram Desktop result.json of a supergroup (replies, @mentions as entities)."""
    messages: list[dict[str, Any]] = []
    for i, uid, text, reply in _messages(chat):
        unix = 1_700_000_000 + 97 * i
        entities: list[dict[str, Any]] = []
        for n, word in enumerate(text.split(" ")):
            kind = "mention" if word.startswith("@") and len(word) > 1 else "plain"
            piece = word if n == 0 else " " + word
            if kind == "mention" and n:
                entities.append({"type": "plain", "text": " "})
                piece = word
            if entities and entities[-1]["type"] == "plain" and kind == "plain":
                entities[-1]["text"] += piece
            else:
                entities.append({"type": kind, "text": piece})
        rich = any(e["type"] != "plain" for e in entities)
        message: dict[str, Any] = {
            "id": i,
            "type": "message",
            "date": datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%S"),
            "date_unixtime": str(unix),
            "from": chat["people"][uid],
            "from_id": f"user{uid}",
            "text": [e if e["type"] != "plain" else e["text"] for e in entities] if rich else text,
            "text_entities": entities,
        }
        if reply is not None:
            message["reply_to_message_id"] = reply
        messages.append(message)
    return {"name": chat["name"], "type": "private_supergroup", "id": int(chat["id"]), "messages": messages}


def _author(chat: dict[str, Any], uid: str) -> dict[str, Any]:
    handle = chat.get("handles", {}).get(uid) or fold(chat["people"][uid]).replace(" ", "")
    return {
        "id": uid,
        "name": handle,
        "discriminator": "0000",
        "nickname": chat["people"][uid],
        "color": None,
        "isBot": False,
        "roles": [],
        "avatarUrl": "https://cdn.discordapp.com/embed/avatars/0.png",
    }


def discord_export(chat: dict[str, Any]) -> dict[str, Any]:
    """The chat as a DiscordChatExporter JSON of a guild channel (replies as references, mentions)."""
    handles = {h: uid for uid, h in chat.get("handles", {}).items()}
    messages = []
    for i, uid, text, reply in _messages(chat):
        mentions = [
            _author(chat, handles[w[1:].strip(".,!?")])
            for w in text.split()
            if w.startswith("@") and w[1:].strip(".,!?") in handles
        ]
        message: dict[str, Any] = {
            "id": str(1_100_000_000_000_000_000 + i),
            "type": "Reply" if reply is not None else "Default",
            "timestamp": f"2024-03-01T{10 + i // 60:02d}:{i % 60:02d}:00+00:00",
            "timestampEdited": None,
            "callEndedTimestamp": None,
            "isPinned": False,
            "content": text,
            "author": _author(chat, uid),
            "attachments": [],
            "components": [],
            "embeds": [],
            "stickers": [],
            "reactions": [],
            "mentions": mentions,
            "inlineEmojis": [],
        }
        if reply is not None:
            message["reference"] = {
                "type": "Default",
                "messageId": str(1_100_000_000_000_000_000 + reply),
                "channelId": str(chat["id"]),
                "guildId": "4001",
            }
        messages.append(message)
    return {
        "guild": {"id": "4001", "name": chat["name"], "iconUrl": "https://cdn.discordapp.com/x.png"},
        "channel": {
            "id": str(chat["id"]),
            "type": "GuildTextChat",
            "categoryId": "3001",
            "category": "Text",
            "name": chat["name"].replace(" ", "-"),
            "topic": None,
        },
        "dateRange": {"after": None, "before": None},
        "exportedAt": "2024-03-02T00:00:00+00:00",
        "messages": messages,
    }


def chat_key(chat: dict[str, Any], platform: str) -> str:
    """The key the import gives the chat."""
    if platform == "telegram":
        return f"telegram:{-(10**12 + int(chat['id']))}"
    return f"discord:{chat['id']}"


def run_chat(chat: dict[str, Any], folder: Path, platform: str, cwd: Path) -> tuple[list[str], str]:
    """Import the export, ask the questions then /facts in one session: (answers, the /facts reply)."""
    export = folder / f"{platform}.json"
    build = telegram_export if platform == "telegram" else discord_export
    export.write_text(json.dumps(build(chat), ensure_ascii=False), encoding="utf-8")
    data = folder / "data"
    code, _, err = oa.run_chatbot(["import", platform, str(export), "--data", str(data)], "", cwd)
    if code != 0:
        raise RuntimeError(f"import failed: {err}")
    questions = [q for q, _, _ in chat["questions"]]
    lines = [*questions, "/facts"]
    code, out, err = oa.run_chatbot(
        ["chat", "--data", str(data), "--chat", chat_key(chat, platform)], "\n".join(lines) + "\n", cwd
    )
    if code != 0:
        raise RuntimeError(f"chat failed: {err}")
    head, sep, facts = out.rpartition("Facts:")
    if not sep:
        head, facts = out, ""
    blocks = [
        " ".join(line for line in block.splitlines() if not line.startswith(oa.NOTICES)).strip()
        for block in head.split("\n\n")
        if block.strip()
    ]
    return blocks[-len(questions) :], facts


def facts_by_person(chat: dict[str, Any], listing: str) -> dict[str, list[str]]:
    """/facts's lines (folded) under each person of the chat, by author id."""
    ids = {fold(name): uid for uid, name in chat["people"].items()}
    out: dict[str, list[str]] = defaultdict(list)
    who = ""
    for line in listing.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            who = ids.get(fold(line[:-1]), "")
        elif line.strip().startswith("- ") and who:
            out[who].append(fold(line.strip()[2:]))
    return out


def judge(answer: str, expected: list[str] | str) -> str:
    """right / wrong / dont_know (an answerable question) or right / invented (an unanswerable one)."""
    unknown = oa.UNKNOWN_MARK in answer.casefold() or "don\u2019t know" in answer.casefold()
    if expected == "UNKNOWN":
        return "right" if unknown else "invented"
    if all(fold(piece) in fold(answer) for piece in expected):
        return "right"
    return "dont_know" if unknown else "wrong"


def score(chats: list[dict[str, Any]], platform: str | None, cwd: Path = ROOT) -> dict[str, Any]:
    """Every question judged and every labelled fact and trap checked, per chat."""
    rows: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="group_chats_") as tmp:
        for n, chat in enumerate(chats):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            answers, listing = run_chat(chat, folder, platform or chat["platform"], cwd)
            for (question, expected, kind), answer in zip(chat["questions"], answers, strict=True):
                rows.append(
                    {
                        "split": chat["split"],
                        "chat": chat["name"],
                        "kind": kind,
                        "question": question,
                        "expected": expected,
                        "answer": answer,
                        "verdict": judge(answer, expected),
                    }
                )
            lines = facts_by_person(chat, listing)
            for label, is_trap in [(f, False) for f in chat["facts"]] + [(t, True) for t in chat["traps"]]:
                uid, key, value = label
                hit = any(fold(value) in line for line in lines.get(uid, []))
                facts.append(
                    {
                        "split": chat["split"],
                        "chat": chat["name"],
                        "who": chat["people"][uid],
                        "key": key,
                        "value": value,
                        "trap": is_trap,
                        "hit": hit,
                    }
                )
            for uid, alias in chat.get("aliases", []):
                hit = any(fold(alias) in line for line in lines.get(uid, []))
                facts.append(
                    {
                        "split": chat["split"],
                        "chat": chat["name"],
                        "who": chat["people"][uid],
                        "key": "alias",
                        "value": alias,
                        "trap": False,
                        "alias": True,
                        "hit": hit,
                    }
                )
    return {"rows": rows, "facts": facts}


def summary(res: dict[str, Any], split: str) -> dict[str, Any]:
    """The figures of one split: verdicts (all and per kind), fact recall, traps stored, aliases."""
    rows = [r for r in res["rows"] if r["split"] == split]
    facts = [f for f in res["facts"] if f["split"] == split and not f["trap"] and not f.get("alias")]
    traps = [f for f in res["facts"] if f["split"] == split and f["trap"]]
    aliases = [f for f in res["facts"] if f["split"] == split and f.get("alias")]
    per_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        per_kind[r["kind"]][r["verdict"]] += 1
    return {
        "questions": len(rows),
        "verdicts": Counter(r["verdict"] for r in rows),
        "per_kind": per_kind,
        "facts": (sum(f["hit"] for f in facts), len(facts)),
        "traps": (sum(f["hit"] for f in traps), len(traps)),
        "aliases": (sum(f["hit"] for f in aliases), len(aliases)),
    }


def report(name: str, res: dict[str, Any], splits: list[str]) -> None:
    """Print one run's figures per split."""
    for split in splits:
        s = summary(res, split)
        if not s["questions"]:
            continue
        v = s["verdicts"]
        n = s["questions"]
        found, labelled = s["facts"]
        print(
            f"| {name} | {split} | {v['right']}/{n} ({v['right'] / n:.0%}) | {v['wrong']} | "
            f"{v['dont_know']} | {v['invented']} | {found}/{labelled} ({found / max(1, labelled):.0%}) | "
            f"{s['traps'][0]} | {s['aliases'][0]}/{s['aliases'][1]} |"
        )
        kinds = ", ".join(
            f"{kind} {c['right']}/{sum(c.values())}"
            + (f" (wrong {c['wrong']})" if c["wrong"] else "")
            + (f" (invented {c['invented']})" if c["invented"] else "")
            for kind, c in sorted(s["per_kind"].items())
        )
        print(f"|  | per kind: {kinds} | | | | | | | |")


def write_exports() -> None:
    """Write every chat in both export formats under tests/data/group_chats/<split>/."""
    for chat in load("all"):
        folder = DATA / chat["split"]
        folder.mkdir(exist_ok=True)
        slug = chat["name"].replace(" ", "_")
        for platform, build in (("telegram", telegram_export), ("discord", discord_export)):
            path = folder / f"{slug}.{platform}.json"
            path.write_text(json.dumps(build(chat), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Print the figures of this branch (and of a baseline) on the group chats."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=("blind", "dev", "all"), default="dev")
    parser.add_argument("--as", dest="platform", choices=("telegram", "discord"), default=None)
    parser.add_argument("--baseline-ref", default="", help="a git ref to measure too ('' for none)")
    parser.add_argument("--verbose", action="store_true", help="every question with its answer")
    parser.add_argument("--write-exports", action="store_true", help="write both exports of each chat")
    args = parser.parse_args(argv)
    if args.write_exports:
        write_exports()
        return 0
    chats = load(args.split)
    splits = ["blind", "dev"] if args.split == "all" else [args.split]
    runs: dict[str, Path] = {}
    tmp = Path(tempfile.mkdtemp(prefix="group_baseline_"))
    if args.baseline_ref:
        runs[args.baseline_ref] = oa._checkout(args.baseline_ref, tmp / "tree")
    runs["this branch"] = ROOT
    print("| code | split | right | wrong | don't know | invented | /facts recall | traps | aliases |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    try:
        results = {}
        for name, tree in runs.items():
            oa.ROOT = tree  # the child processes run that tree's bot and engine
            try:
                results[name] = score(chats, args.platform, cwd=tree)
            finally:
                oa.ROOT = ROOT
            report(name, results[name], splits)
        if args.verbose:
            res = results["this branch"]
            for r in res["rows"]:
                mark = "ok " if r["verdict"] == "right" else r["verdict"].upper()
                print(f"{mark} [{r['chat']}] {r['question']}\n      -> {r['answer']}")
            for f in res["facts"]:
                if f["hit"] == f["trap"]:
                    what = "TRAP STORED" if f["trap"] else "missed"
                    print(f"{what}: [{f['chat']}] {f['who']} {f['key']}: {f['value']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
