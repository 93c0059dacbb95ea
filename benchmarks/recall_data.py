"""LoCoMo as locomo_recall.py reads it: conversations, turns as import messages, questions with evidence."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")


def progress(text: str) -> None:
    """Overwrite the progress line on stderr with `text`."""
    print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


def load(path: str | Path) -> list[dict[str, Any]]:
    """The conversations of a LoCoMo JSON file."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _session_start(raw: str | None, fallback: datetime) -> datetime:
    # "1:56 pm on 8 May, 2023"; a missing or odd date falls back to the previous session's
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime((raw or "").strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return fallback


def turns(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """Every turn of a conversation as an import message, in order (image turns get their caption)."""
    c = conv["conversation"]
    numbers = sorted(
        int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k) and isinstance(c[k], list)
    )
    out: list[dict[str, Any]] = []
    start = datetime(2020, 1, 1, tzinfo=UTC)
    for n in numbers:
        start = _session_start(c.get(f"session_{n}_date_time"), start)
        for i, t in enumerate(c[f"session_{n}"]):
            text = t.get("text") or ""
            if t.get("blip_caption"):
                text = f"{text} [shares {t['blip_caption']}]"
            ts = (start + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            out.append(
                {
                    "role": "user",
                    "text": text or "(empty)",
                    "author": t["speaker"],
                    "message_id": t["dia_id"],
                    "ts": ts,
                }
            )
    return out


def normalise_id(raw: str) -> str | None:
    """`D<session>:<turn>` from a possibly malformed evidence id ("D:11:26", "D30:05")."""
    m = _EVIDENCE.fullmatch(raw.strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else None


def questions(conv: dict[str, Any], valid: set[str]) -> list[dict[str, Any]]:
    """The questions that have evidence: question text, category, normalised evidence ids."""
    out = []
    for qa in conv["qa"]:
        ids = set()
        for item in qa.get("evidence") or []:
            for part in re.split(r"[;\s]+", str(item)):
                norm = normalise_id(part) if part else None
                if norm in valid:
                    ids.add(norm)
        if ids:
            out.append({"question": qa["question"], "category": int(qa["category"]), "evidence": ids})
    return out
