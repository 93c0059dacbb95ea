"""How long `chatbot memory serve` takes to answer its first `GET /health`, against the time
`import aiohttp.web` (its HTTP server library) alone takes, measured in the same run.

Each round starts a fresh interpreter: once for `python -c "import aiohttp.web"`, once for
`python -m bot.cli memory serve` on a free port and an empty data folder, timed from spawn
to the first 200 of /health (polled every 2 ms), then ended with SIGTERM. The medians and
their difference are what the host's own start costs (the target: within 150 ms).

    .venv/bin/python benchmarks/host_start.py [--rounds 9] [--compare /path/to/other/checkout]

With `--compare`, each round also starts the other checkout's host (its code on
PYTHONPATH, this interpreter's packages), so a before/after is measured in the same run.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def import_aiohttp_web() -> float:
    """Seconds for a fresh interpreter to `import aiohttp.web` and exit."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import aiohttp.web"], check=True)
    return time.perf_counter() - started


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


def host_first_health(data: Path, root: Path = ROOT) -> float:
    """Seconds from spawning `chatbot memory serve` (of the checkout `root`) to its first 200 on /health."""
    port = _free_port()
    path = os.pathsep.join([str(root), str(root / "memory_worker" / "src")])
    env = dict(os.environ, MEMORY_API_TOKEN="bench-token-0123456789abcdef", PYTHONPATH=path)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "memory", "serve", "--port", str(port), "--data", str(data)],
        env=env,
        cwd=root,  # `-m` puts the working folder first on sys.path: it must be the checkout measured
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not _healthy(port):
            if proc.poll() is not None:
                raise SystemExit(f"the host exited with {proc.returncode}")
            if time.perf_counter() - started > 30:
                raise SystemExit("the host did not answer /health within 30 s")
            time.sleep(0.002)  # a poll step of the benchmark
        return time.perf_counter() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def main() -> int:
    """Run the rounds and print the medians."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--compare", type=Path, help="another checkout (e.g. main) to measure alongside")
    args = parser.parse_args()
    bare, web, host, other = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            bare.append(bare_interpreter())
            web.append(import_aiohttp_web())
            host.append(host_first_health(Path(tmp) / f"data{i}"))
            if args.compare:
                other.append(host_first_health(Path(tmp) / f"other{i}", args.compare.resolve()))
    b, w, h = (statistics.median(x) * 1000 for x in (bare, web, host))
    print(f"rounds: {args.rounds} (medians; min in brackets)")
    print(f"python -c pass              {b:7.0f} ms  [{min(bare) * 1000:.0f}]")
    print(f"python -c 'import aiohttp.web' {w:4.0f} ms  [{min(web) * 1000:.0f}]")
    print(f"memory serve -> /health 200 {h:7.0f} ms  [{min(host) * 1000:.0f}]")
    print(f"host - aiohttp.web          {h - w:7.0f} ms  (target <= 150 ms)")
    print(f"ratio host / aiohttp.web    {h / w:7.2f}")
    if other:
        o = statistics.median(other) * 1000
        print(f"compared host -> /health    {o:7.0f} ms  [{min(other) * 1000:.0f}] ({args.compare})")
        print(f"compared - aiohttp.web      {o - w:7.0f} ms")
        print(f"this host / that host       {h / o:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
