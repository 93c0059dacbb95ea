"""The memory side of a big import: `POST /import` of prebuilt batches to `chatbot memory serve`,
this checkout beside another one (`--compare REF`, a `git archive` of it), in one run.

The batches are the records of the generated Telegram export of `import_throughput.py` (one
supergroup, 40 authors), 5,000 messages each as the client sends them, encoded before the
clock starts and posted one after the other over HTTP (keep-alive) to a host in its own
process (the checkout's code on PYTHONPATH, a fresh data folder). So the figures are the
host's: the wall time of the posts, the host's CPU seconds (from /proc), and then the first
turn and the first search right after the import's last batch (the turn records a message
and ranks the whole index: it must not pay for the import's index). Two ways of sending:

- `more`: each batch but the last says `"more": true`: the host indexes the import once, at
  its end (issue 22); an older host ignores the field.
- `each`: no field, every batch indexed as it comes (what a client unaware of it sends).
- `hint`: `more` and `remaining` (messages still to come) on each batch but the last, as
  `chatbot import` sends them: the host holds the rows its retention cap deletes before the
  import ends (issue 22, `import_hold`); an older host ignores the field.

    .venv/bin/python benchmarks/import_server.py [--messages N] [--compare main|DIR ...]
        [--modes more,hint,each] [--locomo [PATH]]

`--locomo`: the batches are realistic chat instead (issue 38's measure): every turn of LoCoMo's
dev conversations (/work/shared/locomo/locomo-dev.json, not shipped), in order and again from
the start until N messages, each by its speaker (one author id per speaker and conversation),
5,000 a request.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from host_start import TOKEN, cpu_s, serve_checkout
from import_throughput import write_export

from bot.importers.telegram import sources

ROOT = Path(__file__).resolve().parent.parent
CHAT = "telegram:-1001555000111"
BATCH = 5000


@dataclass
class Figures:
    """One import into a fresh host: wall and host CPU seconds; the first turn and search after it."""

    seconds: float
    cpu: float
    turn_ms: float
    search_ms: float
    imported: int


def batches(export: Path) -> list[list[dict]]:
    """The export's records as import messages, in batches of BATCH."""
    out: list[list[dict]] = [[]]
    for source in sources(export):
        for record in source.records():
            if record is not None:
                if len(out[-1]) >= BATCH:
                    out.append([])
                out[-1].append(record.body())
    return out


LOCOMO = Path("/work/shared/locomo/locomo-dev.json")


def locomo_batches(path: Path, n: int) -> list[list[dict]]:
    """`n` import messages of LoCoMo's dev turns (cycled), in batches of BATCH."""
    turns: list[tuple[str, str, str]] = []  # (speaker, author id, text)
    for c, conv in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        speakers = [conv["conversation"]["speaker_a"], conv["conversation"]["speaker_b"]]
        for key, value in conv["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns.extend(
                    (t["speaker"], f"{c}{speakers.index(t['speaker'])}", t["text"])
                    for t in value
                    if t.get("text")
                )
    records = []
    for i in range(n):
        speaker, author_id, text = turns[i % len(turns)]
        ts = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(1_600_000_000 + 30 * i))
        records.append(
            {
                "role": "user",
                "text": text,
                "author": speaker,
                "author_id": author_id,
                "message_id": str(i + 1),
                "ts": ts,
            }
        )
    return [records[i : i + BATCH] for i in range(0, n, BATCH)]


def checkout(ref: str, dest: Path) -> Path:
    """The tree of `ref` (a commit or branch of this repository) extracted under dest."""
    dest.mkdir(parents=True)
    archive = dest.with_suffix(".tar")
    subprocess.run(["git", "archive", "-o", str(archive), ref], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _call(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None) -> dict:
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    conn.request(method, path, body=body, headers=headers)
    answer = conn.getresponse()
    data = answer.read()
    if answer.status != 200:
        raise SystemExit(f"{method} {path} answered {answer.status}: {data[:300]!r}")
    return json.loads(data)


def run(root: Path, data: Path, bodies: list[bytes]) -> Figures:
    """Serve `root`'s host on `data`, post the bodies, then one turn and one search; the figures."""
    proc, port = serve_checkout(root, data)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _call(conn, "GET", f"/v1/chats/{CHAT}/stats")  # the engine is loaded
                break
            except (ConnectionError, OSError):
                conn.close()
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the host did not start") from None
                time.sleep(0.05)  # a poll step of the benchmark
        path = f"/v1/chats/{CHAT}/import"
        cpu, started = cpu_s(proc.pid), time.perf_counter()
        imported = sum(_call(conn, "POST", path, body)["imported"] for body in bodies)
        seconds, cpu = time.perf_counter() - started, cpu_s(proc.pid) - cpu
        turn = json.dumps(
            {"text": "who took the ferry to lisbon with the map?", "author": "Ann", "author_id": "a1"}
        )
        started = time.perf_counter()
        _call(conn, "POST", f"/v1/chats/{CHAT}/turn", turn.encode())
        turn_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        found = _call(conn, "GET", f"/v1/chats/{CHAT}/search?q=summit%20coffee%20bridge%20painting&k=3")
        search_ms = (time.perf_counter() - started) * 1000
        if len(found["results"]) != 3:
            raise SystemExit("the first search after the import found nothing")
        return Figures(seconds, cpu, turn_ms, search_ms, imported)
    finally:
        conn.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def main() -> None:
    """Build the batches, run each checkout and way of sending, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument(
        "--compare",
        action="append",
        help="a ref, or a folder holding a checkout, to measure beside this one (repeatable; default main)",
    )
    ap.add_argument("--modes", default="more,hint,each")
    ap.add_argument("--locomo", nargs="?", type=Path, const=LOCOMO, default=None, help="LoCoMo's turns")
    args = ap.parse_args()
    modes = args.modes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.locomo:
            parts = locomo_batches(args.locomo, args.messages)
        else:
            print(f"writing an export of {args.messages} messages ...", file=sys.stderr)
            write_export(work / "result.json", args.messages)
            parts = batches(work / "result.json")
        n = sum(len(p) for p in parts)
        after = [sum(len(p) for p in parts[i + 1 :]) for i in range(len(parts))]  # messages still to come

        def body(i: int, mode: str) -> dict:
            last = i == len(parts) - 1
            if mode == "each" or last:
                return {"messages": parts[i]}
            return {"messages": parts[i], "more": True} | ({"remaining": after[i]} if mode == "hint" else {})

        encoded = {
            mode: [json.dumps(body(i, mode), ensure_ascii=False).encode() for i in range(len(parts))]
            for mode in modes
        }
        trees = [("this checkout", ROOT)]
        for i, ref in enumerate(args.compare or ["main"]):
            given = Path(ref)
            other = given if given.is_dir() else checkout(ref, work / f"compare{i}")
            trees.append((ref if not given.is_dir() else given.name, other))
        rows = []
        for name, root in trees:
            for mode in modes:
                print(f"importing into {name}, {mode} ...", file=sys.stderr)
                data = work / f"data-{len(rows)}"
                rows.append((f"{name}, {mode}", run(root, data, encoded[mode])))
        base = rows[-1][1]
        print(f"\nPOST /import of {n:,} messages in {len(parts)} batches to `chatbot memory serve`")
        print(
            f"{'host, batches':<28} {'s':>7} {'msg/s':>8} {'x':>5} {'host cpu s':>10} {'us/msg':>7} "
            f"{'turn ms':>8} {'search ms':>9}"
        )
        for what, f in rows:
            print(
                f"{what:<28} {f.seconds:7.1f} {n / f.seconds:8,.0f} {base.seconds / f.seconds:5.2f} "
                f"{f.cpu:10.1f} {f.cpu / n * 1e6:7.0f} {f.turn_ms:8.1f} {f.search_ms:9.1f}"
            )
        print(f"(x: speed against the last row; imported {', '.join(str(f.imported) for _, f in rows)})")


if __name__ == "__main__":
    main()
