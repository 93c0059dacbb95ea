"""Files of the fake Telegram Bot API: `getFile` and the downloads under `/file/bot<token>/<file_path>`.

Tests add a file's bytes and get the object a message carries (`voice`, `audio`,
`video_note`, `photo` sizes, `document`); the bot then asks `getFile` for its `file_path` and
downloads it from base_file_url, as from the real server. Files over 20 MB are refused by
`getFile` like the real Bot API does; `fail_downloads` makes the next downloads answer 500.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from aiohttp import web

MAX_DOWNLOAD = 20 * 1024 * 1024  # the Bot API serves files up to 20 MB


class FileRefused(Exception):
    """getFile refused: the description the real server gives."""


@dataclass
class FileStore:
    """The fake's files: bytes by file_id, and every download served."""

    token: str
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # file_id -> (file_path, data)
    downloads: list[str] = field(default_factory=list)  # file_paths served, in order
    fail_downloads: int = 0
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def add(self, data: bytes, folder: str, ext: str) -> dict:
        """Store `data`; the file fields a message's media object carries."""
        n = next(self._ids)
        file_id = f"{folder}-file-{n}"
        self.files[file_id] = (f"{folder}/file_{n}.{ext}", data)
        return {"file_id": file_id, "file_unique_id": f"{folder}-unique-{n}", "file_size": len(data)}

    def get_file(self, file_id: str) -> dict:
        """The File object of getFile."""
        if file_id not in self.files:
            raise FileRefused("Bad Request: invalid file_id")
        path, data = self.files[file_id]
        if len(data) > MAX_DOWNLOAD:
            raise FileRefused("Bad Request: file is too big")
        unique = file_id.replace("-file-", "-unique-")
        return {"file_id": file_id, "file_unique_id": unique, "file_size": len(data), "file_path": path}

    async def download(self, request: web.Request) -> web.Response:
        """`GET /file/bot<token>/<file_path>`."""
        if request.match_info["token"] != self.token:
            return web.json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401
            )
        path = request.match_info["path"]
        if self.fail_downloads > 0:
            self.fail_downloads -= 1
            return web.Response(status=500, text="Internal Server Error")
        data = next((d for p, d in self.files.values() if p == path), None)
        if data is None:
            return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)
        self.downloads.append(path)
        return web.Response(body=data, content_type="application/octet-stream")

    # -- media objects of messages ------------------------------------------------------

    def voice(self, data: bytes, duration: int = 3, mime: str = "audio/ogg") -> dict:
        """{"voice": Voice}."""
        return {"voice": {**self.add(data, "voice", "oga"), "duration": duration, "mime_type": mime}}

    def audio(
        self, data: bytes, duration: int = 30, name: str = "song.mp3", mime: str = "audio/mpeg"
    ) -> dict:
        """{"audio": Audio}."""
        fields = self.add(data, "music", name.rsplit(".", 1)[-1])
        return {"audio": {**fields, "duration": duration, "file_name": name, "mime_type": mime}}

    def video_note(self, data: bytes, duration: int = 5, length: int = 240) -> dict:
        """{"video_note": VideoNote}."""
        return {
            "video_note": {**self.add(data, "video_notes", "mp4"), "duration": duration, "length": length}
        }

    def photo(self, *sizes: tuple[int, int, bytes]) -> dict:
        """{"photo": [PhotoSize, ...]} from (width, height, bytes), smallest first as Telegram sends them."""
        return {"photo": [{**self.add(d, "photos", "jpg"), "width": w, "height": h} for w, h, d in sizes]}

    def document(self, data: bytes, name: str, mime: str) -> dict:
        """{"document": Document}."""
        return {
            "document": {
                **self.add(data, "documents", name.rsplit(".", 1)[-1]),
                "file_name": name,
                "mime_type": mime,
            }
        }
