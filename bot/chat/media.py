"""Voice messages and photos: what the pipeline makes of a message's `MediaPart`s before answering.

Voice (Telegram voice, audio, video notes; Discord audio attachments) is transcribed through
the OpenAI-compatible `POST /audio/transcriptions` (`OpenAICompatTranscriber`) and then
handled like typed text, remembered as "[voice] transcript". Photos go to a tier with
`vision = true` as an image content part (a base64 data URL, scaled to `max_side_px`),
remembered as "[photo] caption". The answer's own call describes the picture: the model is
asked to start with one line "Image: ...", which the reader never sees and memory keeps as
"[photo: ...]" at the head of the bot's reply (see `split_description`). Whatever cannot be
read (over a cap, offline, no vision tier, a corrupt file, a failing endpoint) gets a clear
notice, and a caption is still handled as text.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.chat.models.base import ImagePart, TextPart
from bot.chat.types import IncomingMessage, MediaPart
from bot.config import PhotoSettings, TranscriptionSettings
from bot.errors import BadImage, TranscriptionFailed

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = logging.getLogger(__name__)

VOICE_MARK = "[voice]"
PHOTO_MARK = "[photo]"
MAX_IMAGES = 4  # image parts per message (a Discord message may carry several)
DESCRIBE = (
    "The latest message includes an image. Begin your answer with exactly one line of the form "
    "'Image: <one sentence saying what the image shows>', then answer the message on the next lines."
)

VOICE_OFFLINE = (
    "I can't listen to voice messages right now: that needs a speech-to-text model, and none is "
    "configured (set OPENAI_API_KEY, see [transcription] in config/bot.toml). Please type it."
)
VOICE_TOO_LONG = "That voice message is too long for me: I transcribe up to {limit}, and it is {length}."
VOICE_TOO_BIG = "That audio file is too large for me: I transcribe files up to {limit}."
VOICE_FAILED = (
    "Sorry, I couldn't transcribe your voice message: {why}. Please try again in a moment, or type it."
)
VOICE_SILENT = "I couldn't make out any words in that voice message."
PHOTO_NO_VISION = (
    "I can't look at pictures here: no configured model reads images (a tier with vision = true)."
)
PHOTO_OFFLINE = "I can't look at pictures while I have no language model (offline)."
PHOTO_BAD = "I couldn't open that picture: the file seems damaged, or it isn't an image."
PHOTO_TOO_BIG = "That picture is too large for me: I read images up to {limit}."
PHOTO_FETCH_FAILED = "I couldn't download that picture. Please try again."
CAPTION_READ = "I answered your caption."


class Transcriber(Protocol):
    """Speech to text behind one endpoint."""

    model: str

    async def transcribe(self, data: bytes, name: str, mime: str, *, timeout: float) -> str:
        """The words spoken in `data`; raises `TranscriptionFailed`."""


class OpenAICompatTranscriber:
    """`POST /audio/transcriptions` on an OpenAI-compatible endpoint, through the openai SDK."""

    def __init__(self, client: AsyncOpenAI, model: str) -> None:
        self.client = client
        self.model = model

    async def transcribe(self, data: bytes, name: str, mime: str, *, timeout: float) -> str:
        """One transcription; failures (timeout, HTTP error, bad answer) raise `TranscriptionFailed`."""
        import openai

        try:
            async with asyncio.timeout(timeout):
                result = await self.client.audio.transcriptions.create(
                    model=self.model, file=(name, data, mime or "application/octet-stream"), timeout=timeout
                )
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise TranscriptionFailed("the speech-to-text service did not answer in time") from exc
        except openai.APIStatusError as exc:
            raise TranscriptionFailed(f"the speech-to-text service answered HTTP {exc.status_code}") from exc
        except openai.APIError as exc:
            raise TranscriptionFailed("the speech-to-text service could not be reached") from exc
        # The SDK builds its answer from whatever the server sent, unchecked: anything but a
        # transcription with text (or the text itself) is unreadable.
        try:
            text: object = result if isinstance(result, str) else result.text
        except AttributeError:
            text = None
        if not isinstance(text, str):
            raise TranscriptionFailed("the speech-to-text service answered something unreadable")
        return text.strip()


@dataclass(frozen=True)
class Intake:
    """A message's words and pictures as the pipeline takes them, media read."""

    text: str  # recorded in memory, and the text of the model's current message
    images: tuple[tuple[str, bytes], ...] = ()  # (mime, data) for a vision tier
    notice: str = ""  # shown before the answer, never recorded
    answer: bool = True  # False: the notice is the whole answer (no model call)

    @property
    def record(self) -> bool:
        """False when there is nothing to remember (a voice message that could not be read)."""
        return bool(self.text.strip())


def _size(n: float) -> str:
    return f"{n / 1_000_000:.0f} MB" if n >= 1_000_000 else f"{n / 1000:.0f} kB"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def marked(mark: str, *words: str) -> str:
    """ "[photo] caption": how a media message is remembered."""
    rest = " ".join(w.strip() for w in words if w and w.strip())
    return f"{mark} {rest}" if rest else mark


def unaddressed_text(message: IncomingMessage) -> str:
    """What a media message nobody asked the bot about is remembered as (no model, no transcription):
    a photo as "[photo] caption"; a voice message only when it has a caption ("[voice] caption")."""
    kinds = {p.kind for p in message.media}
    if "photo" in kinds:
        return marked(PHOTO_MARK, message.text)
    if "voice" in kinds and message.text.strip():
        return marked(VOICE_MARK, message.text)
    return message.text


class MediaReader:
    """Turns a message with media into an `Intake` (see the module docstring)."""

    def __init__(
        self,
        transcriber: Transcriber | None,
        transcription: TranscriptionSettings,
        photos: PhotoSettings,
        *,
        vision: bool,
        offline: bool,
    ) -> None:
        self.transcriber = transcriber
        self.transcription = transcription
        self.photos = photos
        self.vision = vision and not offline
        self.offline = offline

    async def read(self, message: IncomingMessage) -> Intake:
        """The intake of one addressed message."""
        voice = next((p for p in message.media if p.kind == "voice"), None)
        photos = [p for p in message.media if p.kind == "photo"][:MAX_IMAGES]
        if photos:
            return await self._photos(photos, message.text)
        if voice is not None:
            return await self._voice(voice, message.text)
        return Intake(message.text)

    # -- voice ------------------------------------------------------------------------

    async def _voice(self, part: MediaPart, caption: str) -> Intake:
        notice, transcript = await self._transcribe(part)
        if transcript:
            return Intake(marked(VOICE_MARK, transcript, caption))
        if caption.strip():  # the caption is still read
            return Intake(marked(VOICE_MARK, caption), notice=notice)
        return Intake("", notice=notice, answer=False)

    async def _transcribe(self, part: MediaPart) -> tuple[str, str]:
        """(notice, transcript): one of them is empty."""
        cfg = self.transcription
        if self.transcriber is None:
            return VOICE_OFFLINE, ""
        if part.duration_s is not None and part.duration_s > cfg.max_duration_s:
            limit, length = _duration(cfg.max_duration_s), _duration(part.duration_s)
            return VOICE_TOO_LONG.format(limit=limit, length=length), ""
        if part.size is not None and part.size > cfg.max_bytes:
            return VOICE_TOO_BIG.format(limit=_size(cfg.max_bytes)), ""
        try:
            data = await part.fetch()
        except Exception as exc:  # the platform's download failed: tell the user, keep going
            log.warning("could not download a voice message: %r", exc)
            return VOICE_FAILED.format(why="I could not download it"), ""
        if len(data) > cfg.max_bytes:
            return VOICE_TOO_BIG.format(limit=_size(cfg.max_bytes)), ""
        try:
            text = await self.transcriber.transcribe(
                data, part.name or "voice.ogg", part.mime, timeout=cfg.timeout_s
            )
        except TranscriptionFailed as exc:
            log.warning("transcription failed: %s", exc.why)
            return VOICE_FAILED.format(why=exc.why), ""
        return ("", text) if text else (VOICE_SILENT, "")

    # -- photos -----------------------------------------------------------------------

    async def _photos(self, parts: list[MediaPart], caption: str) -> Intake:
        text = marked(PHOTO_MARK, caption)
        images: list[tuple[str, bytes]] = []
        notice = ""
        if self.offline or not self.vision:
            notice = PHOTO_OFFLINE if self.offline else PHOTO_NO_VISION
        else:
            for part in parts:
                problem, image = await self._image(part)
                if image is not None:
                    images.append(image)
                else:
                    notice = problem
        if images:
            return Intake(text, images=tuple(images), notice=notice)
        if caption.strip():  # the caption is still handled as text
            return Intake(text, notice=f"{notice} {CAPTION_READ}")
        return Intake(text, notice=notice, answer=False)

    async def _image(self, part: MediaPart) -> tuple[str, tuple[str, bytes] | None]:
        limit = self.photos.max_bytes
        if part.size is not None and part.size > limit:
            return PHOTO_TOO_BIG.format(limit=_size(limit)), None
        try:
            data = await part.fetch()
        except Exception as exc:  # the platform's download failed
            log.warning("could not download a picture: %r", exc)
            return PHOTO_FETCH_FAILED, None
        if len(data) > limit:
            return PHOTO_TOO_BIG.format(limit=_size(limit)), None
        try:
            # Decoding is CPU work: off the event loop.
            return "", await asyncio.to_thread(normalize_image, data, self.photos.max_side_px)
        except BadImage as exc:
            log.info("unreadable picture: %s", exc)
            return PHOTO_BAD, None


_MIME = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}


def normalize_image(data: bytes, max_side: int) -> tuple[str, bytes]:
    """(mime, bytes) of a picture a vision model takes: decoded fully (a corrupt file raises
    `BadImage`), kept as it is when small enough in a common format, else scaled to `max_side`
    and sent as JPEG."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()  # decode it all: a truncated or damaged file fails here, not at the model
            fmt = img.format or ""
            if max(img.size) <= max_side and fmt in _MIME:
                return _MIME[fmt], data
            img.thumbnail((max_side, max_side))
            out = io.BytesIO()
            img.convert("RGB").save(out, "JPEG", quality=85)
            return "image/jpeg", out.getvalue()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise BadImage(f"{type(exc).__name__}: {exc}") from exc


def image_content(text: str, images: tuple[tuple[str, bytes], ...]) -> list[TextPart | ImagePart]:
    """The content parts of a user message with pictures: the text, then each image as a data URL."""
    parts: list[TextPart | ImagePart] = [{"type": "text", "text": text}]
    for mime, data in images:
        url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


# -- the description line -------------------------------------------------------------

_DESCRIPTION = re.compile(
    # Possessive runs and a greedy line (its markup stripped after): linear on a run of spaces.
    r"^\s*+[*_]*+[ \t]*+image[ \t]*+[*_]*+[ \t]*+:[ \t]*+[*_]*+[ \t]*+(?P<d>[^\n]*)(?:\n|$)",
    re.I,
)
DESCRIPTION_WAIT_CHARS = 400  # a first line longer than this is not the description line


def split_description(text: str) -> tuple[str, str]:
    """("what the image shows", the answer the reader sees) from an answer that starts
    "Image: ..."; ("", text) when the model did not write that line."""
    match = _DESCRIPTION.match(text)
    described = match.group("d").rstrip("*_ \t").strip() if match else ""
    if not match or not described:
        return "", text
    return described, text[match.end() :].lstrip("\n")


def remembered_answer(text: str) -> str:
    """The bot's reply to a photo as memory keeps it: "[photo: description]" on its first line."""
    description, visible = split_description(text)
    return f"[photo: {description}]\n{visible}" if description else text


async def hide_description(pieces: AsyncIterator[str]) -> AsyncIterator[str]:
    """A streamed answer without its "Image: ..." first line (held back until the line ends)."""
    head: str | None = ""
    async for piece in pieces:
        if head is None:  # the first line is settled: pieces pass straight through
            yield piece
            continue
        head += piece
        if "\n" not in head and len(head) < DESCRIPTION_WAIT_CHARS:
            continue
        _, visible = split_description(head)
        if visible:
            yield visible
        head = None
    if head:
        _, visible = split_description(head)
        if visible:
            yield visible
