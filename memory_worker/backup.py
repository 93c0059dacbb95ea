"""`chatbot memory backup DEST` and `chatbot memory restore SRC`: the local host's memory, copied safely.

A backup may run while the host serves. Each chat's database is copied with SQLite's
online backup API in one step, inside one read transaction: a consistent snapshot of that
chat (WAL mode lets the host keep writing meanwhile). Chats are independent, like Durable
Objects, so each is consistent on its own; the alarm table (pending compactions) is copied
last. The copy is written beside DEST and renamed into place at the end, so a backup cut
short never looks complete. `manifest.json` lists every file with its chat key.

A restore checks every file before it touches DIR: no symbolic link anywhere (never
followed), the size the manifest lists, `PRAGMA integrity_check`, the chat key stored in
the file equal to the one its name is made from (a file renamed to another chat's name
would serve that chat), the schema the migrations make (no trigger or view of anyone
else's, nothing missing, no newer version: memory_worker/backup_schema.py), and the content
hash (SHA-256) the manifest lists, checked again on the copy it restores. One file that
fails refuses the whole backup, with a one-line reason. The hash finds a file edited
without its manifest; one rewritten with its manifest is stopped by the schema check only
where it changes the schema. It refuses a DIR that holds anything unless `force`, refuses while
another process writes DIR (it holds `DIR/.serving.lock`, see `ServeLock`; the restore holds
it meanwhile, so no host starts on the folder it swaps), and swaps the restored folder in by
renames.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from memory_engine.errors import MemoryEngineError
from memory_worker.backup_schema import alarms_schema_problem, chat_schema_problem, sha256_of
from memory_worker.local.chats import chat_file
from memory_worker.local.storage import SERVE_LOCK, FolderInUse, ServeLock, private_file

FORMAT = 2  # 2: a content hash per file
MANIFEST = "manifest.json"
ALARMS = "alarms.sqlite3"


class ManifestFile(TypedDict):
    """One chat's file in a backup: where, whose, how big."""

    file: str
    chat_key: str | None  # None: a database without its key (a restore refuses it)
    bytes: int
    sha256: str  # of the copy: a restore refuses a file that does not match


class Manifest(TypedDict):
    """`manifest.json` as a backup writes it (a restore reads it back field by field: it is a file)."""

    format: int
    created_at: str
    source: str
    alarms: bool
    alarms_sha256: str | None  # None: no alarm table
    chats: list[ManifestFile]


class BackupError(MemoryEngineError, RuntimeError):
    """A backup or restore that cannot be done; the message says why, and nothing was changed."""


@dataclass
class BackupReport:
    """What a backup or restore did."""

    chats: int = 0
    bytes: int = 0
    seconds: float = 0.0
    vanished: int = 0  # chats forgotten while the backup ran: not in the copy

    def line(self, verb: str, where: str) -> str:
        """The one summary line ("backed up 3 chats (0.1 MB) to DEST in 0.2 s")."""
        gone = f" ({self.vanished} forgotten meanwhile, left out)" if self.vanished else ""
        size = f"{self.bytes / 1e6:.1f} MB"
        return f"{verb} {self.chats} chats ({size}) {where} in {self.seconds:.1f} s{gone}"


def _chat_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "chats").glob("*/*.sqlite3"))


def _open_read_only(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def _copy(source: Path, target: Path) -> str | None:
    """Copy one database with the backup API; the chat key stored in it (None if it has none)."""
    for folder in (target.parent.parent, target.parent):  # chats/ab/: each one 0700
        folder.mkdir(mode=0o700, exist_ok=True)
    private_file(target)
    src = _open_read_only(source)
    try:
        dst = sqlite3.connect(target, isolation_level=None)
        try:
            # No fsync per file (37 ms -> 2 ms a chat, measured): one os.sync() ends the backup.
            dst.execute("PRAGMA synchronous=OFF")
            src.backup(dst)  # pages=-1: the whole database in one step, one snapshot
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            try:
                rows = dst.execute("SELECT value FROM state WHERE key = 'chat_key'").fetchall()
            except sqlite3.Error:
                rows = []  # not a chat database (the alarm table)
        finally:
            dst.close()
    finally:
        src.close()
    return str(rows[0][0]) if rows else None


def _fresh_target(dest: Path) -> Path:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BackupError(f"{dest} exists and is not empty: choose a new folder for the backup")
    temp = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(mode=0o700, parents=True)
    return temp


def backup(data_dir: Path, dest: Path) -> BackupReport:
    """Copy the memory under `data_dir` (a local host's --data) to the new folder `dest`."""
    data_dir, dest = Path(data_dir), Path(dest)
    if not (data_dir / "chats").is_dir() and not (data_dir / ALARMS).exists():
        raise BackupError(f"{data_dir} holds no memory (no chats/ folder): is --data right?")
    started = time.perf_counter()
    temp = _fresh_target(dest)
    report = BackupReport()
    files: list[ManifestFile] = []
    try:
        for path in _chat_files(data_dir):
            rel = path.relative_to(data_dir)
            try:
                key = _copy(path, temp / rel)
            except sqlite3.OperationalError:
                if path.exists():
                    raise
                report.vanished += 1  # forgotten between the listing and the copy
                continue
            if not path.exists():  # forgotten while it was copied: the copy must not keep it
                (temp / rel).unlink(missing_ok=True)
                report.vanished += 1
                continue
            size = (temp / rel).stat().st_size
            files.append({"file": str(rel), "chat_key": key, "bytes": size, "sha256": sha256_of(temp / rel)})
            report.chats += 1
            report.bytes += size
        if (data_dir / ALARMS).exists():
            _copy(data_dir / ALARMS, temp / ALARMS)
        manifest: Manifest = {
            "format": FORMAT,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": str(data_dir.resolve()),
            "alarms": (temp / ALARMS).exists(),
            "alarms_sha256": sha256_of(temp / ALARMS) if (temp / ALARMS).exists() else None,
            "chats": files,
        }
        fd = os.open(temp / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "w", encoding="utf-8") as f:
            json.dump(manifest, f, ensure_ascii=False, indent=0)
        os.sync()  # every copy on disk before the backup is named complete
        if dest.exists():
            dest.rmdir()  # empty, checked above
        temp.rename(dest)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    report.seconds = time.perf_counter() - started
    return report


def read_manifest(src: Path) -> dict[str, Any]:
    """The manifest of a backup folder; BackupError when it is not one."""
    try:
        manifest = json.loads((Path(src) / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackupError(f"{src} is not a backup made by `chatbot memory backup` (no {MANIFEST})") from None
    except (OSError, ValueError) as err:
        raise BackupError(f"{src}/{MANIFEST} cannot be read: {err}") from None
    if isinstance(manifest, dict) and manifest.get("format") == 1:
        raise BackupError(
            f"{src} was made by an older version, without content hashes to check: take a new backup"
        )
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{src}/{MANIFEST}: unknown backup format {manifest.get('format')!r}")
    return manifest


def _no_link(src: Path, name: str) -> Path:
    """`src/name`, a regular file reached without a symbolic link; BackupError otherwise."""
    rel = Path(name)
    if not name or rel.is_absolute() or ".." in rel.parts:
        raise BackupError(f"{src}: {name or 'an entry'} is missing: the backup is incomplete")
    path = src
    for part in rel.parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            raise BackupError(f"{src}: {name} is missing: the backup is incomplete") from None
        if stat.S_ISLNK(mode):
            raise BackupError(f"{path} is a symbolic link: a backup holds none, nothing was restored")
    if not stat.S_ISREG(mode):
        raise BackupError(f"{path} is not a file: nothing was restored")
    return path


def _check_hash(path: Path, listed: object) -> None:
    if not isinstance(listed, str) or not listed:
        raise BackupError(f"{path} has no content hash in the manifest: nothing was restored")
    if sha256_of(path) != listed:
        raise BackupError(f"{path} does not match its content hash in the manifest: nothing was restored")


def _check_file(path: Path, entry: dict[str, Any] | None, alarms_hash: object = None) -> None:
    """One file of a backup: its size as listed, sound, (a chat) the chat its name says, the
    schema the migrations make, and the content hash listed."""
    if entry is not None:
        size, listed = path.stat().st_size, entry.get("bytes")
        if size != listed:
            raise BackupError(f"{path} has {size} bytes, the manifest says {listed}: nothing was restored")
    try:
        conn = _open_read_only(path)
        try:
            result = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if result == "ok" and entry is not None:
                rows = conn.execute("SELECT value FROM state WHERE key = 'chat_key'").fetchall()
                stored = str(rows[0][0]) if rows else None
                named = stored is not None and chat_file(stored) == Path(entry["file"])
                if not named or stored != entry.get("chat_key"):
                    raise BackupError(
                        f"{path} holds the chat of another name (its key: {stored!r}): nothing was restored"
                    )
            if result == "ok":
                problem = chat_schema_problem(conn) if entry is not None else alarms_schema_problem(conn)
                if problem:
                    why = f"{problem}: not what the migrations make, nothing was restored"
                    raise BackupError(f"{path}: {why}")
        finally:
            conn.close()
    except sqlite3.Error as err:
        result = str(err)
    if result != "ok":
        raise BackupError(f"{path} is damaged ({result}): nothing was restored")
    _check_hash(path, entry.get("sha256") if entry is not None else alarms_hash)


def verify(src: Path) -> dict[str, Any]:
    """Check a backup: every listed file present, no link, the size listed, sound, the right chat's.
    Its manifest."""
    src = Path(src)
    manifest = read_manifest(src)
    entries = manifest.get("chats")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise BackupError(f"{src}/{MANIFEST}: `chats` is not a list of files")
    for entry in entries:
        _check_file(_no_link(src, str(entry.get("file", ""))), entry)
    if manifest.get("alarms"):
        _check_file(_no_link(src, ALARMS), None, manifest.get("alarms_sha256"))
    return manifest


def _copy_no_follow(source: Path, target: Path) -> None:
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "rb") as src, os.fdopen(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1024 * 1024)


def restore(src: Path, data_dir: Path, *, force: bool = False) -> BackupReport:
    """Put the backup `src` in place as the memory under `data_dir` (refused while a host serves it)."""
    src, data_dir = Path(src), Path(data_dir)
    started = time.perf_counter()
    manifest = verify(src)
    held = data_dir.exists() and any(p.name != SERVE_LOCK for p in data_dir.iterdir())
    if held and not force:
        raise BackupError(f"{data_dir} is not empty: add --force to replace the memory in it")
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = ServeLock(data_dir)  # FolderInUse while a host serves it: its databases stay open
    temp = data_dir.parent / f".{data_dir.name}.restoring-{os.getpid()}"
    old = data_dir.parent / f".{data_dir.name}.replaced-{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    report = BackupReport()
    try:
        temp.mkdir(mode=0o700)
        (temp / "chats").mkdir(mode=0o700)
        for entry in manifest["chats"]:
            target = temp / entry["file"]
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _copy_no_follow(src / entry["file"], target)
            if target.stat().st_size != entry.get("bytes") or sha256_of(target) != entry.get("sha256"):
                changed = src / entry["file"]
                raise BackupError(f"{changed} changed while it was restored: nothing was restored")
            report.chats += 1
            report.bytes += target.stat().st_size
        if manifest.get("alarms"):
            _copy_no_follow(src / ALARMS, temp / ALARMS)
            if sha256_of(temp / ALARMS) != manifest.get("alarms_sha256"):
                raise BackupError(f"{src / ALARMS} changed while it was restored: nothing was restored")
        data_dir.rename(old)
        temp.rename(data_dir)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        if old.exists() and not data_dir.exists():
            old.rename(data_dir)  # put the memory that was there back
        raise
    finally:
        lock.release()
    shutil.rmtree(old, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


def backup_main(dest: Path, data_dir: Path) -> int:
    """`chatbot memory backup DEST [--data DIR]`."""
    try:
        report = backup(data_dir, dest)
    except (BackupError, OSError, sqlite3.Error) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(report.line("backed up", f"to {dest}"))
    return 0


def restore_main(src: Path, data_dir: Path, force: bool) -> int:
    """`chatbot memory restore SRC [--data DIR] [--force]`."""
    try:
        report = restore(src, data_dir, force=force)
    except FolderInUse as err:
        print(f"error: {err}; nothing was restored", file=sys.stderr)
        return 2
    except (BackupError, OSError, sqlite3.Error) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(report.line("restored", f"into {data_dir}"))
    return 0
