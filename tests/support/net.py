"""Ports that cannot race: a TCP relay that can be shut and opened, and the memory host as a
subprocess that binds port 0 and prints its URL."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.core import wait_until


class TcpGate:
    """A TCP relay on a 127.0.0.1 port of its own, which can be shut (connections refused) and
    opened again, in front of a server that may move (`open(target_port)`).

    The port cannot race: it is bound once, on port 0, by a socket that never listens and is
    held until `close()`. The listening socket shares it (SO_REUSEPORT); while it is shut, the
    kernel refuses connections there (nothing listens) and no other server can take the port.
    """

    def __init__(self, target_port: int = 0) -> None:
        self.target_port = target_port
        self._hold = socket.socket()
        self._hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self._hold.bind(("127.0.0.1", 0))
        self.port: int = self._hold.getsockname()[1]
        self._server: asyncio.AbstractServer | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>."""
        return f"http://127.0.0.1:{self.port}"

    async def open(self, target_port: int | None = None) -> None:
        """Listen: connections go through to the target (a new one when given)."""
        await self.shut()  # open once: a second open moves the target
        if target_port is not None:
            self.target_port = target_port
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port, reuse_port=True)

    async def shut(self) -> None:
        """Stop listening and cut every open connection: the next connect is refused."""
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._pipes):
            writer.transport.abort()
        await self._server.wait_closed()
        self._server = None

    async def close(self) -> None:
        """Shut, and give the port back."""
        await self.shut()
        self._hold.close()

    async def __aenter__(self) -> TcpGate:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._pipes.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if dst.transport:
                    dst.transport.abort()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        finally:
            self._pipes.difference_update((writer, up_writer))


def port_of(url: str) -> int:
    """The port of an http://host:port URL (servers bind port 0 and report it in their URL)."""
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


# The CPython host prints "memory host serving DIR on URL"; the Pyodide host's Node process
# prints its ready line, {"ready": URL, ...}, once it listens.
_SERVING = re.compile(r'^memory host serving .* on (http://\S+)$|^\{"ready": ?"(http://[^"]+)"', re.M)


class ServedMemory:
    """`chatbot memory serve --port 0` as a subprocess, its output kept in a file.

    The system picks the port (no free-port guess that another process could take first);
    `start` reads the URL the host prints, so each restart may get a new `url`.
    """

    def __init__(
        self,
        data: Path,
        token: str,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        runtime: str | None = None,
    ):
        self.data, self.token, self.env, self.runtime = data, token, env or {}, runtime
        self.log = log or data.parent / f"{data.name}-serve.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.starts = 0

    async def start(self, timeout: float = 20) -> None:
        """Start the host, wait for the URL it prints and for /health to answer 200."""
        chatbot = Path(sys.executable).with_name("chatbot")
        env = dict(os.environ, MEMORY_API_TOKEN=self.token, **self.env)
        offset = self.log.stat().st_size if self.log.exists() else 0
        args = ["memory", "serve", "--host", "127.0.0.1", "--port", "0", "--data", str(self.data)]
        if self.runtime:
            args += ["--runtime", self.runtime]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(chatbot), *args],
                env=env,
                stdout=out,
                stderr=out,
                start_new_session=True,  # its own process group: a kill takes whatever it started
            )
        self.starts += 1

        def printed_url() -> str | None:
            assert self.proc is not None and self.proc.poll() is None, self.output()[-2000:]
            with open(self.log, "rb") as f:
                f.seek(offset)
                found = _SERVING.search(f.read().decode("utf-8", "replace"))
            return (found.group(1) or found.group(2)) if found else None

        self.url = await wait_until(printed_url, timeout=timeout, what="the memory host's URL")
        async with httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=2) as client:

            async def healthy() -> bool:
                try:
                    return (await client.get("/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await wait_until(healthy, timeout=timeout, what="memory host health")

    def output(self) -> str:
        """Everything the host printed so far (all its runs)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill9(self) -> None:
        """SIGKILL to its process group, and reap."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(timeout=10) == -signal.SIGKILL

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM; the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop_quietly(self) -> None:
        """Make sure nothing is left running."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
