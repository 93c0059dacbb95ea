"""Shared fixtures. The network beyond loopback does not exist in tests: any attempt fails loudly."""

from __future__ import annotations

import ipaddress
import re
import socket

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_local(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class NetworkBlocked(RuntimeError):
    """Raised when a test tries to reach beyond 127.0.0.1."""


def _guarded_connect(self, address):
    if not _is_local(address):
        raise NetworkBlocked(f"test tried to reach the network: {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if not _is_local(address):
        raise NetworkBlocked(f"test tried to reach the network: {address!r}")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if host not in (None, "localhost") and not _is_local(
        (host if isinstance(host, str) else host.decode(), 0)
    ):
        raise NetworkBlocked(f"test tried to resolve a network host: {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True, scope="session")
def _no_network():
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex
    socket.getaddrinfo = _guarded_getaddrinfo
    yield
    socket.socket.connect = _real_connect
    socket.socket.connect_ex = _real_connect_ex
    socket.getaddrinfo = _real_getaddrinfo


# Property tests draw the same examples on every run of `make test` (a red CI must mean
# a regression, not a lucky draw); `HYPOTHESIS_PROFILE=explore` draws new ones.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("repeatable", derandomize=True, deadline=None)
_hypothesis_settings.register_profile("explore", deadline=None)
_hypothesis_settings.load_profile(__import__("os").environ.get("HYPOTHESIS_PROFILE", "repeatable"))


# The tests on the session's Pyodide host (below): backend "pyodide" in a parametrized id, and
# these two that take the host itself.
_ON_THE_PYODIDE_HOST = re.compile(
    r"\[(?:[^\]]*-)?pyodide(?:-[^\]]*)?\]$|::(test_every_host_answers_exactly_alike|test_state_survives_eviction_of_every_object)$"
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test`'s two workers share the tests out one by one, except that every test on the
    session's Pyodide host goes to the same worker: one host starts (7 s of CPU), not two.
    (xdist's own `--dist loadgroup` marks are not applied under pytest 9.2.)"""
    from xdist.scheduler import LoadScopeScheduling

    class OnePyodideWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "pyodide" if _ON_THE_PYODIDE_HOST.search(nodeid) else nodeid

    return OnePyodideWorker(config, log)


@pytest.fixture(scope="session")
def pyodide_host(tmp_path_factory):
    """One Pyodide host (memory_worker/pyodide) for the session, driven over stdin; skipped
    when Node 22 or the npm packages are missing (`make pyodide` installs them)."""
    from memory_worker.pyodide_runtime import PyodideHost, PyodideUnavailable, check_installed
    from tests.support import TOKEN

    try:
        check_installed()
    except PyodideUnavailable as err:
        pytest.skip(str(err))
    host = PyodideHost(tmp_path_factory.mktemp("pyodide") / "data", TOKEN, control=True).start()
    yield host
    host.stop()


@pytest.fixture
async def worker(tmp_path):
    """The Worker and its Durable Object (entry.py) under the fake workerd, started and closed."""
    from tests.support import WorkerBackend

    backend = await WorkerBackend(tmp_path / "w").start()
    try:
        yield backend
    finally:
        await backend.close()


# The fakes of the outside services: one running server per test, on 127.0.0.1.
@pytest.fixture
async def tg():
    """A running fake Telegram Bot API."""
    from tests.fakes.telegram_server import FakeTelegram

    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def openai():
    """A running fake OpenAI-compatible server; its answers echo the user's words."""
    from tests.fakes.openai_server import Echo, FakeOpenAI

    async with FakeOpenAI(default=Echo()) as server:
        yield server


@pytest.fixture
async def fake_discord():
    """A running fake Discord REST API + gateway; discord.py's process-wide endpoints are
    restored afterwards (the adapter points them at the fake)."""
    import discord

    from tests.fakes.discord_server import FakeDiscord

    saved = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    async with FakeDiscord() as server:
        yield server
    discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = saved


# The people and places of a test on a fake platform (their classes live in tests/support/).
@pytest.fixture
def world(fake_discord):
    """A Discord guild with an admin, a member and an owner-listed user, plus the member's DM."""
    from tests.support import World

    return World(fake_discord)


@pytest.fixture
def people(tg):
    """Telegram users Alice (group admin) and Bob (member), their group and private chats."""
    from tests.support import People

    return People(tg)


@pytest.fixture
async def discord_bot(fake_discord, openai, world, tmp_path):
    """The Discord adapter on the real pipeline (embedded memory host), connected to the fake Discord."""
    from tests.support import discord_on_pipeline

    async with discord_on_pipeline(fake_discord, openai, world, tmp_path) as client:
        yield client


# `make quick` leaves these out: they start real processes (the bot, the hosts, Pyodide) or
# wait on many real servers, and take most of the suite's time. Their tests are the same kind
# of test as the rest; `make test` runs them all.
SYSTEM_MODULES = frozenset(
    {
        "adapters/discord/test_discord_e2e.py",
        "adapters/telegram/test_telegram.py",
        "adapters/telegram/test_telegram_e2e.py",
        "adapters/telegram/test_telegram_streaming.py",
        "app/test_shutdown.py",
        "bot/memory/test_faults_memory.py",
        "bot/memory/test_reliability_bot.py",
        "bot/models/test_tier_fallback.py",
        "bot/proactive/test_followups.py",
        "bot/proactive/test_reminders_delivery.py",
        "bot/proactive/test_reminders_faults.py",
        "bot/test_hardening_regex.py",
        "dashboard/test_dashboard_browser.py",
        "dashboard/test_dashboard_pyodide.py",
        "engine/test_compaction.py",
        "engine/test_user_data_api.py",
        "hosts/test_api_contract.py",
        "hosts/test_memory_contract.py",
        "hosts/test_pyodide.py",
        "hosts/test_reminders_pyodide.py",
    }
)


def pytest_collection_modifyitems(config, items):
    """Mark the system tests (SYSTEM_MODULES, and every test on the Pyodide host) `system`."""
    here = __import__("pathlib").Path(__file__).parent
    for item in items:
        module = item.path.relative_to(here).as_posix()
        if module in SYSTEM_MODULES or _ON_THE_PYODIDE_HOST.search(item.nodeid):
            item.add_marker(pytest.mark.system)
