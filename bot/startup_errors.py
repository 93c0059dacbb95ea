"""What a start-up error a user can cause says: one line that names the cause and the option
that fixes it, instead of a traceback (a port taken, a data folder that is a file, a host
name that does not resolve, a folder a restore holds, a bot token the platform rejects).

Standard library only: `chatbot memory serve` imports this and nothing of the bot.
"""

from __future__ import annotations

import argparse
import errno
import socket
from pathlib import Path

_WHERE = {  # the command, and what sets its listening address and port
    "memory": ("--host", "--port"),
    "telegram": ("TELEGRAM_WEBHOOK_LISTEN", "TELEGRAM_WEBHOOK_PORT"),
}


def explain(exc: BaseException, args: argparse.Namespace) -> str | None:
    """The one line for `exc` raised while `chatbot ARGS` started; None when it is no user's doing."""
    kind = f"{type(exc).__module__.split('.')[0]}.{type(exc).__name__}"
    if kind == "telegram.InvalidToken":  # python-telegram-bot: getMe answered 401/404
        return (
            "Telegram rejected TELEGRAM_BOT_TOKEN: copy it again from @BotFather (/mybots -> API Token); "
            "`chatbot doctor` checks it"
        )
    if type(exc).__name__ == "FolderInUse":  # memory_worker.local.storage: another writer holds it
        return str(exc)  # names the folder, the process that holds it and what to do
    if isinstance(exc, socket.gaierror):
        host_opt, _ = _WHERE.get(args.command, ("--host", "--port"))
        host = getattr(args, "host", None) or "the listening address"
        return f"cannot listen on {host}: no such host name; give this machine's address with {host_opt}"
    if not isinstance(exc, OSError):
        return None
    if exc.filename is None:
        return _listening(exc, args)
    return _file(exc, args)


def _listening(exc: OSError, args: argparse.Namespace) -> str | None:
    """A bind that failed (an OSError without a file name)."""
    host_opt, port_opt = _WHERE.get(args.command, ("--host", "--port"))
    host, port = getattr(args, "host", None), getattr(args, "port", None)
    if args.command == "telegram":
        host, port = None, None  # read from the settings, not the command line
    at = f"port {port} on {host}" if host and port is not None else "the listening port"
    if exc.errno == errno.EADDRINUSE:
        return f"{at} is taken (another `chatbot` or program listens there): choose another with {port_opt}"
    if exc.errno == errno.EACCES:
        return (
            f"not allowed to listen on {at} (below 1024 needs administrator rights): use another {port_opt}"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        where = host or "that address"
        return (
            f"cannot listen on {where}: not an address of this machine; use {host_opt} 127.0.0.1 or its own"
        )
    return None


def _file(exc: OSError, args: argparse.Namespace) -> str:
    """A file or folder that could not be made or opened."""
    name = str(exc.filename)
    data = getattr(args, "data", None)
    hint = " with --data" if data is not None and _within(Path(name), Path(data)) else ""
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        return f"{name} (or a folder above it) is a file, not a folder: choose a folder{hint or ' for it'}"
    if isinstance(exc, PermissionError):
        return f"cannot write {name} (permission denied): choose a folder you can write{hint}"
    if isinstance(exc, FileNotFoundError):
        return f"{name} does not exist"
    return f"{name}: {exc.strerror or 'cannot be used'}{' (choose another' + hint + ')' if hint else ''}"


def _within(path: Path, folder: Path) -> bool:
    """True when `path` is `folder` or inside it (compared as given and as resolved)."""
    pairs = ((path, folder), (path.resolve(), folder.resolve()))
    return any(p == f or f in p.parents for p, f in pairs)
