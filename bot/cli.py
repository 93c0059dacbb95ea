"""The `chatbot` command: `chat`, `telegram`, `discord`, `memory serve`."""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys
from pathlib import Path

DEFAULT_DATA = Path(os.environ.get("CHATBOT_DATA", "data"))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `chatbot` command."""
    parser = argparse.ArgumentParser(prog="chatbot", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser("chat", help="chat in the console (embedded memory unless MEMORY_URL)")
    chat.add_argument("--data", type=Path, default=DEFAULT_DATA, help="memory and outbox folder")
    chat.add_argument("--chat", default=None, help="chat key (default console:<user name>)")

    for name in ("telegram", "discord"):
        p = sub.add_parser(name, help=f"run the {name.title()} bot")
        p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="memory and outbox folder")

    memory = sub.add_parser("memory", help="the memory worker's local host")
    msub = memory.add_subparsers(dest="memory_command", required=True)
    serve = msub.add_parser("serve", help="serve the memory HTTP API v1")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787)
    serve.add_argument("--data", type=Path, default=DEFAULT_DATA / "memory")
    serve.add_argument(
        "--runtime",
        choices=("cpython", "pyodide"),
        default="cpython",
        help="cpython: the local host; pyodide: entry.py itself on Pyodide under Node 22 (make pyodide)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `chatbot` console command."""
    args = build_parser().parse_args(argv)
    from bot.router import logs

    logs.configure(
        logging.DEBUG if args.verbose else logging.WARNING if args.command == "chat" else logging.INFO,
        json_lines=os.environ.get("LOG_FORMAT", "").lower() == "json",
    )
    if args.command == "memory" and args.runtime == "pyodide":
        from memory_worker.pyodide_runtime import serve

        return serve(args.host, args.port, args.data)
    if args.command == "memory":
        from memory_worker.local import serve_forever

        return serve_forever(args.host, args.port, args.data)
    from bot import app

    if args.command == "chat":
        chat_key = args.chat or f"console:{_user_name()}"
        return app.run_chat(args.data, chat_key)
    if args.command == "telegram":
        return app.run_telegram(args.data)
    if args.command == "discord":
        return app.run_discord(args.data)
    return 2


def _user_name() -> str:
    try:
        name = getpass.getuser()
    except Exception:  # no login name in some containers
        name = "me"
    return "".join(c for c in name if c.isalnum() or c in "_-.") or "me"


if __name__ == "__main__":
    sys.exit(main())
