"""Import throughput of `chatbot import telegram`, and backup time for many small chats.

    .venv/bin/python benchmarks/import_throughput.py [--messages 200000] [--chats 10000]
        [--compare main [--rounds 4]]

1. Writes a Telegram Desktop export of one supergroup with N messages (plain and rich
   text, replies, media, service messages, 40 authors), then imports it end to end over
   HTTP (check pass + send pass + the host's work), twice: against a running local host
   (`chatbot memory serve` in its own process, MEMORY_URL set: the import reads the next
   batch while the host stores one), and into the embedded local host (no MEMORY_URL: one
   process does both), exactly as `chatbot import telegram FILE --data DIR` does. In the
   same run, baselines: the check pass alone (reading and validating, nothing sent),
   `json.load` of the file, and `POST /import` of the same request bodies already built
   (with `more` and `remaining`, as the import sends them: the memory worker's own ceiling,
   embedded; the import end to end takes about the check pass plus this). CPU seconds are
   this process's (the client's, and the embedded host's when there is one).
2. Creates C chats of 5 messages each in a local host's folder, then times
   `chatbot memory backup` of it against a plain file copy (`shutil.copytree`, which is not
   a consistent copy of databases in use) of the same folder.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.chat.memory.client import HttpMemoryClient
from bot.config import settings_from
from bot.importers import run
from memory_worker.backup import backup
from memory_worker.local import ChatStore, EmbeddedMemoryHost

ROOT = Path(__file__).resolve().parent.parent

WORDS = [
    "trail",
    "summit",
    "water",
    "map",
    "station",
    "saturday",
    "rain",
    "boots",
    "tent",
    "coffee",
    "lisbon",
    "oslo",
    "ferry",
    "bike",
    "route",
]
WORDS += [
    "photo",
    "weekend",
    "river",
    "bridge",
    "camp",
    "fire",
    "night",
    "morning",
    "lunch",
    "train",
    "ticket",
    "hill",
]


def write_export(path: Path, n: int, seed: int = 7, entities: bool = False) -> None:
    """A supergroup export of n messages, streamed to disk; with `entities`, each message also
    carries its `text_entities`, as Telegram Desktop writes them (the readers ignore them)."""
    rnd = random.Random(seed)
    t0 = 1_600_000_000
    with open(path, "w", encoding="utf-8") as f:
        f.write(
            '{\n "name": "Bench group",\n "type": "private_supergroup",\n "id": 1555000111,\n "messages": [\n'
        )
        for i in range(1, n + 1):
            unix = t0 + i * 30
            m: dict = {"id": i, "type": "message", "date": "2020-09-13T12:26:40", "date_unixtime": str(unix)}
            who = rnd.randrange(40)
            m["from"], m["from_id"] = f"Person {who}", f"user{1000 + who}"
            words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 25)))
            r = rnd.random()
            if r < 0.03:
                m = {
                    "id": i,
                    "type": "service",
                    "date": m["date"],
                    "date_unixtime": str(unix),
                    "actor": m["from"],
                    "actor_id": m["from_id"],
                    "action": "pin_message",
                    "text": "",
                }
            elif r < 0.15:
                m["text"] = [
                    words[:10],
                    {"type": "bold", "text": "look"},
                    " ",
                    {"type": "link", "text": "https://x.org"},
                ]
            elif r < 0.20:
                m["photo"], m["text"] = "(File not included.)", words
            elif r < 0.22:
                m["media_type"], m["sticker_emoji"], m["file"], m["text"] = (
                    "sticker",
                    "😀",
                    "(File not included.)",
                    "",
                )
            else:
                m["text"] = words
            if i > 1 and rnd.random() < 0.2:
                m["reply_to_message_id"] = i - 1
            if entities:
                text = m["text"] if isinstance(m["text"], list) else [m["text"]] if m["text"] else []
                m["text_entities"] = [{"type": "plain", "text": p} if isinstance(p, str) else p for p in text]
            f.write("  " + json.dumps(m, ensure_ascii=False) + ("," if i < n else "") + "\n")
        f.write(" ]\n}\n")


async def import_end_to_end(export: Path, data: Path, env: dict[str, str] | None = None) -> run.ImportReport:
    """What `chatbot import telegram` does: embedded memory under data/memory, or MEMORY_URL's host."""
    return await run.import_export(
        "telegram", export, settings_from({}, env or {}), data, out=io.StringIO(), progress=None
    )


@contextmanager
def served(
    data: Path, host: dict[str, float] | None = None, tree: Path | None = None
) -> Iterator[dict[str, str]]:
    """`chatbot memory serve` (of `tree`, else this checkout) on a free port in its own process;
    the env that points an import at it. `host["cpu"]`: its CPU seconds, once it has stopped."""
    token = secrets.token_urlsafe(16)
    args = ["memory", "serve", "--host", "127.0.0.1", "--port", "0", "--data", str(data)]
    env = dict(os.environ, MEMORY_API_TOKEN=token)
    if tree is None:
        args = [str(Path(sys.executable).with_name("chatbot")), *args]
    else:  # `-m` from the tree: its folder comes first on sys.path
        args = [sys.executable, "-m", "bot.cli", *args]
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "memory_worker" / "src")])
    log = data.parent / f"{data.name}-serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=out, cwd=tree)
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"memory host serving .* on (http://\S+)", log.read_text())):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the memory host did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield {"MEMORY_URL": found.group(1), "MEMORY_API_TOKEN": token}
    finally:
        proc.terminate()
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0  # reaped above
        if host is not None:
            host["cpu"] = usage.ru_utime + usage.ru_stime


# The import to a running host, in a child: its wall and CPU seconds measured inside it.
CLIENT = """
import asyncio, io, os, sys, time
from pathlib import Path
from bot.config import settings_from
from bot.importers import run
wall, cpu = time.perf_counter(), time.process_time()
report = asyncio.run(run.import_export(
    "telegram", Path(sys.argv[1]), settings_from({}, dict(os.environ)), Path(sys.argv[2]),
    out=io.StringIO(), progress=False,
))
print(report.imported, report.skipped, time.perf_counter() - wall, time.process_time() - cpu)
print(run.__file__, file=sys.stderr)
"""


# The check pass alone (pass 1 with its spool: read, validate, encode), in a child.
CHECK = """
import hashlib, sys, tempfile, time
from pathlib import Path
from bot.importers import run
wall, cpu = time.perf_counter(), time.process_time()
with tempfile.TemporaryFile() as spool:
    plan = run.check("telegram", Path(sys.argv[1]), chat=None, scope="chat", progress=False, spool=spool)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    spool.seek(0)
    print(plan.total, wall, cpu, hashlib.sha256(spool.read()).hexdigest())
print(run.__file__, file=sys.stderr)
"""
SPOOLS: set[str] = set()  # the digests of every spool written: one, or the checkouts differ


def check_child(export: Path, tree: Path | None) -> tuple[float, float]:
    """Pass 1 of `chatbot import` (of `tree`, else this checkout) with its spool: wall s, CPU s.
    The spool's bytes must be the same for every checkout (SPOOLS)."""
    path = [str(tree), str(tree / "memory_worker" / "src")] if tree else []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*path, str(ROOT)]))
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(export)], env=env, cwd=tree or ROOT, capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(f"the check failed: {out.stderr[-2000:]}")
    assert out.stderr.strip().startswith(str(tree or ROOT)), out.stderr
    _, wall, cpu, digest = out.stdout.split()
    SPOOLS.add(digest)
    return float(wall), float(cpu)


def import_child(export: Path, root: Path, name: str, tree: Path | None) -> tuple[float, float, float, int]:
    """`chatbot import` to a fresh `chatbot memory serve`, both of `tree` (else this checkout):
    wall s, client CPU s, host CPU s, messages imported."""
    host: dict[str, float] = {}
    with served(root / f"{name}-host", host, tree) as env:
        path = [str(tree), str(tree / "memory_worker" / "src")] if tree else []
        child_env = dict(os.environ, **env, PYTHONPATH=os.pathsep.join([*path, str(ROOT)]))
        out = subprocess.run(
            [sys.executable, "-c", CLIENT, str(export), str(root / f"{name}-client")],
            env=child_env,
            cwd=tree or ROOT,
            capture_output=True,
            text=True,
        )
    if out.returncode:
        raise RuntimeError(f"the import failed: {out.stderr[-2000:]}")
    imported, _, wall, cpu = out.stdout.split()
    assert out.stderr.strip().startswith(str(tree or ROOT)), out.stderr  # the client asked for
    return float(wall), float(cpu), host["cpu"], int(imported)


@contextmanager
def archived(ref: str) -> Iterator[Path]:
    """The files of `ref` in a temporary folder (`git archive`: no worktree is registered)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def timed(fn):  # type: ignore[no-untyped-def]
    """fn(), its wall seconds and this process's CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def prebuilt_bodies(export: Path) -> list[tuple[str, bytes]]:
    """The request bodies `chatbot import` sends for the export, in order: its check pass's spool,
    each batch but a chat's last saying `more` and `remaining` (as `run.send` does)."""
    with tempfile.TemporaryFile() as spool:
        plan = run.check("telegram", export, chat=None, scope="chat", progress=False, spool=spool)
        bodies, sent, left = [], dict.fromkeys(plan.messages, 0), dict(plan.messages)
        for key, count, body in run.spooled(spool):
            sent[key] += 1
            left[key] -= count
            more = sent[key] < plan.batches[key]
            bodies.append((key, body[:-1] + run.MORE % left[key] if more else body))
    return bodies


async def import_prebuilt(bodies: list[tuple[str, bytes]], data: Path) -> tuple[float, float]:
    """POST /import of the bodies `chatbot import` sends, encoded before the clock starts, to the
    embedded host: the memory worker's own ceiling. Wall and CPU seconds (the host's, and the
    posting's few)."""
    async with EmbeddedMemoryHost(data, token="bench", summarizer=None) as host:
        client = HttpMemoryClient(host.url, "bench", timeout=600)
        async with client:
            started, cpu = time.perf_counter(), time.process_time()
            for key, body in bodies:
                await client.import_encoded(key, body)
            return time.perf_counter() - started, time.process_time() - cpu


def make_chats(data: Path, n: int) -> None:
    """n chats of 5 messages each, written through the engine as the host would."""
    store = ChatStore(data, max_open=64)
    for c in range(n):
        memory = store.open(f"telegram:-100{c}")
        memory.import_messages(
            [
                {
                    "role": "user",
                    "text": f"hello {c} number {i}",
                    "author": "a",
                    "author_id": "1",
                    "message_id": str(i),
                    "ts": None,
                }
                for i in range(5)
            ]
        )
        if c % 1000 == 999:
            print(f"  {c + 1} chats", file=sys.stderr, flush=True)
    store.close()


def main() -> None:
    """Run both measurements and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--chats", type=int, default=10_000)
    ap.add_argument("--compare", metavar="REF", help="also import with REF's client and host (git archive)")
    ap.add_argument("--rounds", type=int, default=1, help="with --compare: alternated rounds of the two")
    ap.add_argument("--served-only", action="store_true", help="only the imports to a running host")
    ap.add_argument("--entities", action="store_true", help="messages carry `text_entities` (real exports)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        export = root / "result.json"
        print(f"writing an export of {args.messages} messages ...", file=sys.stderr)
        write_export(export, args.messages, entities=args.entities)
        size = export.stat().st_size / 1e6

        def load() -> None:
            with open(export, encoding="utf-8") as f:
                json.load(f)

        _, load_s, load_cpu = timed(load)
        plan, check_s, check_cpu = timed(
            lambda: run.check("telegram", export, chat=None, scope="chat", progress=None)
        )
        n = plan.total
        print("importing end to end, against a running local host ...", file=sys.stderr)
        # With --compare, this checkout's import and REF's alternate (ABBA...: the load drifts);
        # each row is its fastest round, and every round's pair is printed after the table.
        runs: dict[str, list[tuple[float, float, float]]] = {"this": [], "ref": []}
        with archived(args.compare) if args.compare else contextlib.nullcontext() as tree:
            for r in range(args.rounds if args.compare else 1):
                for who in ("this", "ref") if r % 2 == 0 else ("ref", "this"):
                    if who == "ref" and not args.compare:
                        continue
                    print(f"  round {r + 1}: {who}", file=sys.stderr)
                    checkout = tree if who == "ref" else None
                    wall, cpu, host, count = import_child(export, root, f"{who}{r}", checkout)
                    assert count == n, (who, count, n)
                    runs[who].append((wall, cpu, host))
        served_s, served_cpu, host_cpu = min(runs["this"])
        imported = n
        rows: list[tuple[str, float, float | None, float | None]] = [
            ("chatbot import to a running chatbot memory serve", served_s, served_cpu, host_cpu),
        ]
        if args.compare:
            ref_s, ref_cpu, ref_host = min(runs["ref"])
            rows.append((f"  the same, {args.compare}'s client and host", ref_s, ref_cpu, ref_host))
            # The check pass of each, alternated (the machine's load drifts): the fastest of 3.
            mine, theirs = [], []
            with archived(args.compare) as tree:
                for _ in range(3):
                    mine.append(check_child(export, None))
                    theirs.append(check_child(export, tree))
            assert len(SPOOLS) == 1, "the spools differ"  # the same bodies, byte for byte
            (m_s, m_cpu), (t_s, t_cpu) = min(mine), min(theirs)
            rows.append(("  check pass (pass 1 + spool), fastest of 3", m_s, m_cpu, None))
            rows.append((f"  check pass, {args.compare}'s, fastest of 3", t_s, t_cpu, None))
        if not args.served_only:
            print("importing end to end, embedded ...", file=sys.stderr)
            embedded, e2e_s, e2e_cpu = timed(lambda: asyncio.run(import_end_to_end(export, root / "e2e")))
            print("importing prebuilt batches ...", file=sys.stderr)
            raw_s, raw_cpu = asyncio.run(import_prebuilt(prebuilt_bodies(export), root / "raw"))
            second, again_s, again_cpu = timed(lambda: asyncio.run(import_end_to_end(export, root / "e2e")))
            rows += [
                ("chatbot import, embedded host (one process)", e2e_s, e2e_cpu, None),
                ("  baseline: POST /import of its bodies, prebuilt", raw_s, raw_cpu, None),
            ]
        rows += [
            ("  baseline: check pass alone (ijson)", check_s, check_cpu, None),
            ("  baseline: json.load of the file", load_s, load_cpu, None),
        ]
        if not args.served_only:
            rows.append(("second import, embedded (over 50k: see the note)", again_s, again_cpu, None))

        print(f"\nimport of a {args.messages}-message Telegram export ({size:.0f} MB, {n} with words)")
        head = f"{'what':<50} {'seconds':>8} {'messages/s':>11} {'vs served':>9}"
        print(f"{head} {'client cpu s':>12} {'us/msg':>7} {'host cpu s':>10}")
        for what, sec, cpu, host in rows:
            used = f"{cpu:12.2f} {cpu / n * 1e6:7.1f}" if cpu is not None else f"{'-':>12} {'-':>7}"
            hosted = f"{host:10.1f}" if host is not None else f"{'-':>10}"
            print(f"{what:<50} {sec:8.1f} {n / sec:11,.0f} {sec / served_s:9.2f} {used} {hosted}")
        if args.compare:
            print(f"\nround by round, this checkout against {args.compare} (s; client cpu s; host cpu s):")
            for r, (a, b) in enumerate(zip(runs["this"], runs["ref"], strict=True), 1):
                print(
                    f"  {r}: {a[0]:5.1f} vs {b[0]:5.1f} s ({b[0] / a[0]:.2f}x, "
                    f"{n / a[0]:,.0f} vs {n / b[0]:,.0f} msg/s); "
                    f"client {a[1]:.2f} vs {b[1]:.2f}; host {a[2]:.1f} vs {b[2]:.1f}"
                )
        if args.served_only:
            return
        print(f"imported {imported} (embedded: {embedded.imported}); second run imported {second.imported}")
        if second.imported:
            # Retention keeps the newest 50,000 rows by row id: their message ids are forgotten,
            # so a repeat of a bigger chat adds the dropped ones back (and drops the others).
            print("note: the chat is over the memory's retention, so message ids were forgotten")

        print(f"\ncreating {args.chats} chats of 5 messages ...", file=sys.stderr)
        data = root / "many"
        make_chats(data, args.chats)
        started = time.perf_counter()
        shutil.copytree(data, root / "plain-copy")
        copy_s = time.perf_counter() - started
        result = backup(data, root / "backup")
        print(f"\nbackup of {args.chats} small chats ({result.bytes / 1e6:.0f} MB)")
        rate = args.chats / result.seconds
        print(f"{'chatbot memory backup':<44} {result.seconds:8.1f} s  {rate:8,.0f} chats/s")
        ratio = result.seconds / copy_s
        print(f"{'  baseline: shutil.copytree (not consistent)':<44} {copy_s:8.1f} s  ratio {ratio:.1f}x")


if __name__ == "__main__":
    main()
