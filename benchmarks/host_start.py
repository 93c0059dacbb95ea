"""How long `chatbot memory serve` takes to answer its first `GET /health`, against the time
`import aiohttp.web` (its HTTP server library) alone takes, measured in the same run.

Each round starts a fresh interpreter: once for `python -c "import aiohttp.web"`, once for
`python -m bot.cli memory serve` on a free port and an empty data folder, timed from spawn
to the first 200 of /health (polled every 2 ms) and then to the 200 of a first turn sent
right after (the host loads its engine after it listens: the turn may wait for it), then
ended with SIGTERM. The medians and their difference are what the host's own start costs
(the target: /health within 150 ms of aiohttp.web). The baseline is timed to the moment the
import is done, not to the interpreter's exit. CPU: what the process had used by then (from
/proc; 10 ms ticks), a figure the load of a shared machine inflates far less than wall time.

    .venv/bin/python benchmarks/host_start.py [--rounds 9] [--compare /path/to/other/checkout]

With `--compare`, each round also starts the other checkout's host (its code on
PYTHONPATH, this interpreter's packages), so a before/after is measured in the same run.
With `--bytecode`, the hosts run from copies compiled beforehand, as `pip install` leaves a
package: without it (an editable install under PYTHONDONTWRITEBYTECODE=1, as here) every
start compiles each module of the project from source, most of the engine's import.
"""

from __future__ import annotations

import argparse
import compileall
import http.client
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789abcdef"


def compiled_copy(root: Path, dest: Path) -> Path:
    """A copy of the checkout's code with its bytecode written beside it, as `pip install` leaves
    an installed package (here PYTHONDONTWRITEBYTECODE=1 and an editable install compile every
    module from source at every start)."""
    for part in ("bot", "memory_worker", "config"):
        shutil.copytree(
            root / part, dest / part, ignore=shutil.ignore_patterns("node_modules", "__pycache__")
        )
    # py_compile writes the .pyc files whatever PYTHONDONTWRITEBYTECODE says
    if not compileall.compile_dir(str(dest), quiet=1):
        raise SystemExit(f"could not compile {dest}")
    return dest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_checkout(root: Path, data: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`chatbot memory serve` of the checkout `root` on `data`, on a free port: (the process, the port)."""
    port = _free_port()
    env = dict(
        os.environ,
        MEMORY_API_TOKEN=TOKEN,
        PYTHONPATH=os.pathsep.join([str(root), str(root / "memory_worker" / "src")]),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "memory", "serve", "--port", str(port), "--data", str(data)],
        env=env,
        cwd=root,  # `-m` puts the working folder first on sys.path: it must be the checkout measured
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, port


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) a running process used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def import_aiohttp_web() -> tuple[float, float]:
    """Seconds (wall, CPU) for a fresh interpreter to have imported `aiohttp.web` (not its exit)."""
    code = "import aiohttp.web, sys; print('imported', flush=True); sys.stdin.read()"
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "imported"
        return time.perf_counter() - started, cpu_s(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def bare_interpreter() -> float:
    """Seconds for a fresh interpreter to start and exit (the floor of both)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def _healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _first_turn(port: int) -> None:
    """POST one turn to a new chat; it must be stored (200)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/v1/chats/bench/turn",
            body=b'{"text": "I live in Porto", "author": "u"}',
            headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
        )
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            raise SystemExit(f"the first turn answered {answer.status}")
    finally:
        conn.close()


def host_first_health(data: Path, root: Path = ROOT) -> tuple[float, float, float]:
    """Seconds from spawning `chatbot memory serve` (of the checkout `root`) to its first 200 on
    /health, and to the 200 of a first turn sent right after it (the engine at work); and the
    CPU seconds the host had used when /health answered (its engine thread's so far included)."""
    started = time.perf_counter()
    proc, port = serve_checkout(root, data)
    try:
        while not _healthy(port):
            if proc.poll() is not None:
                raise SystemExit(f"the host exited with {proc.returncode}")
            if time.perf_counter() - started > 30:
                raise SystemExit("the host did not answer /health within 30 s")
            time.sleep(0.002)  # a poll step of the benchmark
        health, cpu = time.perf_counter() - started, cpu_s(proc.pid)
        _first_turn(port)
        return health, time.perf_counter() - started, cpu
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _row(name: str, rounds: list[tuple[float, ...]], k: int) -> float:
    """Print one figure's median [min] in ms; the median."""
    values = [r[k] * 1000 for r in rounds]
    median = statistics.median(values)
    print(f"{name:34s} {median:7.0f} ms  [{min(values):.0f}]")
    return median


def main() -> int:
    """Run the rounds and print the medians."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--compare", type=Path, help="another checkout (e.g. main) to measure alongside")
    parser.add_argument(
        "--bytecode", action="store_true", help="run compiled copies of the checkouts, as installed"
    )
    args = parser.parse_args()
    bare: list[float] = []
    web: list[tuple[float, float]] = []
    host: list[tuple[float, float, float]] = []
    other: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        this, that = ROOT, args.compare.resolve() if args.compare else None
        if args.bytecode:
            this = compiled_copy(this, Path(tmp) / "this")
            that = that and compiled_copy(that, Path(tmp) / "that")
        for i in range(args.rounds):
            bare.append(bare_interpreter())
            web.append(import_aiohttp_web())
            host.append(host_first_health(Path(tmp) / f"data{i}", this))
            if that:
                other.append(host_first_health(Path(tmp) / f"other{i}", that))
    mode = "compiled copies (as installed)" if args.bytecode else "from source"
    print(f"rounds: {args.rounds} (medians; min in brackets); the hosts run {mode}")
    _row("python -c pass (to its exit)", [(b,) for b in bare], 0)
    w = _row("import aiohttp.web", web, 0)
    wc = _row("import aiohttp.web, CPU", web, 1)
    h = _row("memory serve -> /health 200", host, 0)
    t = _row("memory serve -> first turn 200", host, 1)
    hc = _row("memory serve -> /health, CPU", host, 2)
    print(f"{'host - aiohttp.web':34s} {h - w:7.0f} ms  (target <= 150 ms); CPU {hc - wc:+.0f} ms")
    print(f"{'ratio host / aiohttp.web':34s} {h / w:7.2f}")
    if other:
        print(f"compared: {args.compare}")
        o = _row("compared -> /health 200", other, 0)
        ot = _row("compared -> first turn 200", other, 1)
        oc = _row("compared -> /health, CPU", other, 2)
        print(f"{'compared - aiohttp.web':34s} {o - w:7.0f} ms; CPU {oc - wc:+.0f} ms")
        print(f"this host / that host: /health {h / o:.2f}, first turn {t / ot:.2f}, CPU {hc / oc:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
