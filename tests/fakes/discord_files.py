"""Attachments of the fake Discord, served over HTTP as Discord's CDN serves them.

`store.attachment(channel, "photo.png", data, "image/png")` gives the attachment object a
message carries (id, filename, size, url, content_type; width/height for images,
duration_secs for voice messages); discord.py's `Attachment.read()` downloads it from `url`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class AttachmentStore:
    """The files behind attachment URLs, and every download served."""

    base_url: str = ""  # set once the server listens: http://127.0.0.1:<port>
    files: dict[str, bytes] = field(default_factory=dict)  # path -> bytes
    downloads: list[str] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1_200_000_000_000_000_000))

    def attachment(
        self,
        channel: dict,
        filename: str,
        data: bytes,
        content_type: str,
        *,
        width: int | None = None,
        height: int | None = None,
        duration_secs: float | None = None,
    ) -> dict:
        """Store `data`; the attachment object of a message."""
        aid = str(next(self._ids))
        path = f"/attachments/{channel['id']}/{aid}/{filename}"
        self.files[path] = data
        url = self.base_url + path
        att: dict = {
            "id": aid,
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }
        if width is not None and height is not None:
            att.update(width=width, height=height)
        if duration_secs is not None:
            att.update(duration_secs=duration_secs, waveform="AAAA")
        return att

    async def serve(self, request: web.Request) -> web.Response:
        """`GET /attachments/<channel>/<id>/<name>`, as the CDN answers it."""
        data = self.files.get(request.path)
        if data is None:
            return web.Response(status=404, text="Not Found")
        self.downloads.append(request.path)
        return web.Response(body=data, content_type="application/octet-stream")
