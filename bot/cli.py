"""The `chatbot` command: `chat`, `telegram`, `discord`, `import`, `doctor`, `memory serve|backup|restore`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

DEFAULT_DATA = Path(os.environ.get("CHATBOT_DATA", "data"))


def version() -> str:
    """The installed package's version (the source tree's pyproject.toml states it)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("chatbot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def port_number(text: str) -> int:
    """`--port`: a TCP port, 0 to 65535 (0: any free port)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a number from 0 to 65535")
    return port


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each option's default, except where there is none to show (None, off)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


class _Version(argparse.Action):
    """`--version`, read only when asked: importlib.metadata would cost every start (the memory
    host's among them) a noticeable part of its time."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        """Print `chatbot <version>` and exit."""
        print(f"{parser.prog} {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `chatbot` command."""
    parser = argparse.ArgumentParser(prog="chatbot", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action=_Version, help="show the installed version and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser(
        "chat",
        help="chat in the console (embedded memory unless MEMORY_URL)",
        formatter_class=_Defaults,
    )
    chat.add_argument("--data", type=Path, default=DEFAULT_DATA, help="memory and outbox folder")
    chat.add_argument(
        "--chat", default=None, help="chat key, e.g. telegram:-100123 (default: console:<user name>)"
    )
    chat.add_argument(
        "--as",
        dest="speaker",
        default=None,
        metavar="NAME",
        help="speak as this person of the chat (a display name or an id, e.g. from an import)",
    )

    doctor = sub.add_parser(
        "doctor",
        help="check the configuration, the models, the memory worker and the bot tokens",
        formatter_class=_Defaults,
    )
    doctor.add_argument("--data", type=Path, default=DEFAULT_DATA, help="data folder (embedded memory)")
    doctor.add_argument("--timeout", type=float, default=15.0, help="seconds per check")

    for name in ("telegram", "discord"):
        p = sub.add_parser(name, help=f"run the {name.title()} bot", formatter_class=_Defaults)
        p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="memory and outbox folder")

    imports = sub.add_parser("import", help="import a chat history export into memory")
    isub = imports.add_subparsers(dest="platform", required=True)
    for name, what in (
        ("telegram", "Telegram Desktop's JSON export (result.json: one chat or a whole account)"),
        ("discord", "DiscordChatExporter's JSON (a file, or a folder of them)"),
    ):
        p = isub.add_parser(name, help=what, formatter_class=_Defaults)
        p.add_argument("path", type=Path, help="the export file (or folder)")
        p.add_argument("--chat", default=None, help="import only this chat (its key, id or name)")
        p.add_argument(
            "--data",
            type=Path,
            default=DEFAULT_DATA,
            help="data folder (memory in DIR/memory, as for `chat`; unless MEMORY_URL)",
        )
        p.add_argument("--dry-run", action="store_true", help="check the file and count, send nothing")

    dash = sub.add_parser("dashboard", help="print a one-time login link to the memory worker's dashboard")
    dash.add_argument("--url", default=None, help="the memory worker's URL (default: MEMORY_URL)")
    dash.add_argument("--minutes", type=float, default=10, help="how long the link is good for")
    dash.add_argument("--no-open", action="store_true", help="only print the link, open no browser")
    memory = sub.add_parser("memory", help="the memory worker's local host")
    msub = memory.add_subparsers(dest="memory_command", required=True)
    serve = msub.add_parser("serve", help="serve the memory HTTP API v1", formatter_class=_Defaults)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=port_number, default=8787, help="port to listen on (0: any free port)")
    serve.add_argument("--data", type=Path, default=DEFAULT_DATA / "memory", help="the memory folder")
    serve.add_argument(
        "--runtime",
        choices=("cpython", "pyodide"),
        default="cpython",
        help="cpython: the local host; pyodide: entry.py itself on Pyodide under Node 22 (make pyodide)",
    )
    backup = msub.add_parser(
        "backup", help="copy the local host's memory (safe while it runs)", formatter_class=_Defaults
    )
    backup.add_argument("dest", type=Path, help="a new folder for the backup")
    backup.add_argument(
        "--data", type=Path, default=DEFAULT_DATA / "memory", help="the memory folder to copy"
    )
    restore = msub.add_parser(
        "restore", help="put a backup in place (stop the host first)", formatter_class=_Defaults
    )
    restore.add_argument("src", type=Path, help="a folder made by `chatbot memory backup`")
    restore.add_argument(
        "--data", type=Path, default=DEFAULT_DATA / "memory", help="the memory folder to put it in"
    )
    restore.add_argument("--force", action="store_true", help="replace the memory already in --data")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `chatbot` console command."""
    # Memory, outbox, exports and backups hold what people said: files 0600, folders 0700.
    os.umask(0o077)
    args = build_parser().parse_args(argv)
    try:
        return _command(args)
    except Exception as exc:
        from bot.startup_errors import explain

        line = None if args.verbose else explain(exc, args)  # -v: the whole traceback
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2


def _command(args: argparse.Namespace) -> int:
    """Run the parsed command; its exit status."""
    if args.command == "memory":
        # The memory host imports nothing of the bot (it starts in a fraction of a second
        # after a crash); it writes its own JSON log lines.
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
        return _memory(args)
    from bot.chat import logs

    logs.configure(
        logging.DEBUG
        if args.verbose
        else logging.WARNING
        if args.command in ("chat", "import", "doctor")
        else logging.INFO,
        json_lines=os.environ.get("LOG_FORMAT", "").lower() == "json",
    )
    if args.command == "dashboard":
        return _dashboard(args)
    if args.command == "doctor":
        from bot import doctor

        return doctor.main(args.data, timeout=args.timeout)
    from bot.config import SettingsError

    try:
        return _bot(args)
    except SettingsError as exc:  # a key or table of BOT_CONFIG no setting has, a bad value
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _bot(args: argparse.Namespace) -> int:
    """`chatbot import|chat|telegram|discord`."""
    if args.command == "import":
        from bot.importers.run import run_import

        return run_import(args.platform, args.path, args.data, args.chat, args.dry_run)
    from bot import app

    if args.command == "chat":
        chat_key = args.chat or f"console:{_user_name()}"
        return app.run_chat(args.data, chat_key, args.speaker)
    if args.command == "telegram":
        return app.run_telegram(args.data)
    if args.command == "discord":
        return app.run_discord(args.data)
    return 2


def _dashboard(args: argparse.Namespace) -> int:
    """`chatbot dashboard`: a one-time owner's link for the configured memory worker."""
    import time

    from bot.config import load_settings
    from memory_engine.dashboard.auth import make_link

    settings = load_settings()
    url = args.url or settings.memory_url
    if not url or not settings.memory_token:
        print(
            "error: set MEMORY_URL and MEMORY_API_TOKEN (or --url): the memory worker serves the dashboard "
            "(`chatbot memory serve`, or the Cloudflare Worker); `make chat` prints its embedded one",
            file=sys.stderr,
        )
        return 2
    link = make_link(settings.memory_token, url, int(time.time() * 1000), minutes=args.minutes)
    print(link)
    if not args.no_open and sys.stdout.isatty():
        import webbrowser

        webbrowser.open(link)  # does nothing where there is no browser
    return 0


def _memory(args: argparse.Namespace) -> int:
    """`chatbot memory serve|backup|restore`."""
    if args.memory_command in ("backup", "restore"):
        from memory_worker import backup

        if args.memory_command == "backup":
            return backup.backup_main(args.dest, args.data)
        return backup.restore_main(args.src, args.data, args.force)
    if args.runtime == "pyodide":
        from memory_worker.pyodide_runtime import serve

        return serve(args.host, args.port, args.data)
    from memory_worker.local.cli import serve_forever

    return serve_forever(args.host, args.port, args.data)


def _user_name() -> str:
    import getpass

    try:
        name = getpass.getuser()
    except Exception:  # no login name in some containers
        name = "me"
    return "".join(c for c in name if c.isalnum() or c in "_-.") or "me"


if __name__ == "__main__":
    sys.exit(main())
