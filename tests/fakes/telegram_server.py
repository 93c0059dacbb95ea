"""An in-process fake of the Telegram Bot API (aiohttp.web on 127.0.0.1) for tests.

python-telegram-bot talks to it over real HTTP through `ApplicationBuilder().base_url(fake.base_url)`.
It keeps a small world (users, chats, messages, member roles), answers the methods the bot
uses the way the real server does (same envelopes, same error texts, entities parsed and
text length checked after parsing), delivers injected updates by long polling (a waiting
`getUpdates` wakes as soon as an update is injected; updates stay pending until a later
`getUpdates` confirms them with `offset`, as on the real server) or by webhook, injects
faults, and records every call.

    async with FakeTelegram() as tg:
        alice = tg.user(1, "Alice")
        tg.send(tg.private_chat(alice), alice, "hello")
        msg = await tg.wait_for_message(alice["id"])
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.telegram_files import FileRefused, FileStore

TOKEN = "123456:TEST-token_for-the-fake"
MAX_TEXT = 4096
MAX_CAPTION = 1024
MAX_UPLOAD = 50 * 1000 * 1000  # what the Bot API takes from a bot per file

# Fields PTB sends as JSON strings inside form data.
_JSON_FIELDS = {
    "reply_markup",
    "commands",
    "scope",
    "entities",
    "caption_entities",
    "allowed_updates",
    "reply_parameters",
    "link_preview_options",
    "media",
    "results",
}
_INT_FIELDS = {"chat_id", "message_id", "user_id", "offset", "limit", "timeout", "cache_time"}
_CHAT_ACTIONS = {
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
}
_COMMAND_NAME = re.compile(r"^[a-z0-9_]{1,32}$")


class ApiError(Exception):
    """A Bot API error answer: {"ok": false, "error_code", "description", "parameters"?}."""

    def __init__(self, code: int, description: str, parameters: dict | None = None) -> None:
        super().__init__(description)
        self.code, self.description, self.parameters = code, description, parameters


def bad(description: str) -> ApiError:
    """A 400 Bad Request with the real server's wording."""
    return ApiError(400, f"Bad Request: {description}")


@dataclass
class Call:
    """One recorded Bot API call."""

    method: str
    params: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)
    status: int = 200


@dataclass
class Fault:
    """A scripted error answer for the next call(s) of one method."""

    error_code: int
    description: str
    parameters: dict | None
    times: int


# ----------------------------------------------------------------------------- entities


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _byte_offset(text: str, i: int) -> int:
    return len(text[:i].encode("utf-8"))


_HTML_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-emoji",
}
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^<>]*?)?)\s*(/?)>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d{1,7}|#x[0-9a-fA-F]{1,6});")


def parse_html(text: str) -> str:
    """Parse Telegram HTML into plain text, or raise like the server ("can't parse entities")."""
    out: list[str] = []
    stack: list[tuple[str, int]] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "<":
            m = _TAG.match(text, i)
            if not m:
                raise bad(f"can't parse entities: Unclosed start tag at byte offset {_byte_offset(text, i)}")
            closing, name, attrs = m.group(1), m.group(2).lower(), m.group(3)
            if name not in _HTML_TAGS:
                kind = "end" if closing else "start"
                raise bad(
                    f'can\'t parse entities: Unsupported {kind} tag "{name}"'
                    f" at byte offset {_byte_offset(text, i)}"
                )
            if closing:
                if not stack:
                    raise bad(
                        f"can't parse entities: Unexpected end tag at byte offset {_byte_offset(text, i)}"
                    )
                expected, _ = stack.pop()
                if expected != name:
                    raise bad(
                        f"can't parse entities: Unmatched end tag at byte offset {_byte_offset(text, i)}, "
                        f'expected "</{expected}>", found "</{name}>"'
                    )
            else:
                if name == "a" and "href" not in attrs:
                    pass  # the real server accepts <a> without href and drops the link
                if name == "span" and "tg-spoiler" not in attrs:
                    raise bad(
                        f'can\'t parse entities: Tag "span" must have class "tg-spoiler"'
                        f" at byte offset {_byte_offset(text, i)}"
                    )
                stack.append((name, i))
            i = m.end()
        elif c == "&":
            m = _ENTITY.match(text, i)
            if m:
                out.append(html.unescape(m.group(0)))
                i = m.end()
            else:
                out.append(c)
                i += 1
        elif c == ">":
            out.append(c)  # tolerated by the real server
            i += 1
        else:
            out.append(c)
            i += 1
    if stack:
        name, _ = stack[-1]
        raise bad(f"can't parse entities: Can't find end tag corresponding to start tag \"{name}\"")
    return "".join(out)


def parse_markdown(text: str) -> str:
    """Parse legacy Markdown (*bold* _italic_ `code` ```pre``` [text](url)) into plain text."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            out.append(text[i + 1])
            i += 2
        elif text.startswith("```", i):
            end = text.find("```", i + 3)
            if end < 0:
                raise bad(
                    f"can't parse entities: Can't find end of the entity starting"
                    f" at byte offset {_byte_offset(text, i)}"
                )
            body = text[i + 3 : end]
            first, nl, rest = body.partition("\n")
            out.append(rest if nl and first and " " not in first else body)
            i = end + 3
        elif c in "*_`":
            end = text.find(c, i + 1)
            if end < 0:
                raise bad(
                    f"can't parse entities: Can't find end of the entity starting"
                    f" at byte offset {_byte_offset(text, i)}"
                )
            out.append(text[i + 1 : end])
            i = end + 1
        elif c == "[":
            m = re.compile(r"\[([^\]]*)\]\(([^)]*)\)").match(text, i)
            if not m:
                raise bad(
                    f"can't parse entities: Can't find end of the entity starting"
                    f" at byte offset {_byte_offset(text, i)}"
                )
            out.append(m.group(1))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


_V2_RESERVED = set("_*[]()~`>#+-=|{}.!")


def parse_markdown_v2(text: str) -> str:
    """Parse MarkdownV2 into plain text; unescaped reserved characters are refused as upstream."""
    out: list[str] = []
    open_marks: list[tuple[str, int]] = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 < n and ord(text[i + 1]) <= 126:
                out.append(text[i + 1])
                i += 2
                line_start = False
                continue
            out.append(c)
            i += 1
            continue
        if text.startswith("```", i):
            end = text.find("```", i + 3)
            if end < 0:
                raise bad(
                    f"can't parse entities: Can't find end of Pre entity"
                    f" at byte offset {_byte_offset(text, i)}"
                )
            body = text[i + 3 : end]
            first, nl, rest = body.partition("\n")
            out.append(rest if nl and first and " " not in first else body)
            i = end + 3
            continue
        if c == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise bad(
                    f"can't parse entities: Can't find end of Code entity"
                    f" at byte offset {_byte_offset(text, i)}"
                )
            out.append(text[i + 1 : end])
            i = end + 1
            continue
        if c == ">" and line_start:
            i += 1
            continue
        mark = (
            "__"
            if text.startswith("__", i)
            else "||"
            if text.startswith("||", i)
            else c
            if c in "*_~"
            else None
        )
        if mark:
            if open_marks and open_marks[-1][0] == mark:
                open_marks.pop()
            else:
                open_marks.append((mark, i))
            i += len(mark)
            line_start = False
            continue
        if c == "[":
            m = re.compile(r"\[((?:\\.|[^\]\\])*)\]\(((?:\\.|[^)\\])*)\)").match(text, i)
            if m:
                out.append(parse_markdown_v2(m.group(1)))
                i = m.end()
                continue
        if c in _V2_RESERVED:
            raise bad(
                f"can't parse entities: Character '{c}' is reserved"
                f" and must be escaped with the preceding '\\'"
            )
        out.append(c)
        line_start = c == "\n"
        i += 1
    if open_marks:
        _, at = open_marks[-1]
        raise bad(
            f"can't parse entities: Can't find end of the entity starting"
            f" at byte offset {_byte_offset(text, at)}"
        )
    return "".join(out)


def plain_text(text: str, parse_mode: str | None) -> str:
    """The text the server keeps after entity parsing for `parse_mode`."""
    if not parse_mode:
        return text
    mode = parse_mode.lower()
    if mode == "html":
        return parse_html(text)
    if mode == "markdown":
        return parse_markdown(text)
    if mode == "markdownv2":
        return parse_markdown_v2(text)
    raise bad("unsupported parse_mode")


def detect_entities(text: str) -> list[dict]:
    """Entities the real server computes for a user's message: bot commands and @mentions."""
    entities = []
    for m in re.finditer(
        r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?(?![\w/])|(?<!\w)@[A-Za-z0-9_]{3,32}", text
    ):
        kind = "bot_command" if m.group(0).startswith("/") else "mention"
        entities.append(
            {"type": kind, "offset": _utf16_len(text[: m.start()]), "length": _utf16_len(m.group(0))}
        )
    return entities


# ----------------------------------------------------------------------------- server


class FakeTelegram:
    """The fake Bot API server: a world of users and chats, updates to deliver, and a call log."""

    def __init__(
        self, token: str = TOKEN, username: str = "memo_test_bot", bot_id: int | None = None
    ) -> None:
        self.token = token
        self.bot_user = {
            "id": bot_id or int(token.split(":")[0]),
            "is_bot": True,
            "first_name": "Memo",
            "username": username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.calls: list[Call] = []
        self.chats: dict[int, dict] = {}
        self.messages: dict[tuple[int, int], dict] = {}
        self.roles: dict[tuple[int, int], str] = {}
        self.commands: dict[tuple[str, str], list[dict]] = {}
        self.photos: list[bytes] = []
        self.documents: list[Document] = []
        self.files = FileStore(token)  # getFile and downloads; tg.files.voice(data) makes a voice
        self.webhook_url: str = ""
        self.allowed_updates: list[str] | None = None
        self.webhook_secret: str | None = None
        self.faults: dict[str, list[Fault]] = {}
        self._updates: list[dict] = []
        self._update_ids = itertools.count(1000)
        self._message_ids: dict[int, itertools.count] = {}
        self._callbacks: dict[str, dict] = {}
        self._callback_ids = itertools.count(9000)
        self._changed = asyncio.Condition()
        self._poll_generation = 0
        self._runner: web.AppRunner | None = None
        self._webhook_task: asyncio.Task | None = None
        self._webhook_wake = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self.port = 0

    # --- lifecycle

    @property
    def base_url(self) -> str:
        """What to give PTB's `base_url` (the token is appended by PTB)."""
        return f"http://127.0.0.1:{self.port}/bot"

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        app.router.add_get("/file/bot{token}/{path:.*}", self.files.download)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the port the system chose for port 0
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._webhook_task:
            self._webhook_task.cancel()
        async with self._changed:
            self._poll_generation += 1  # release any waiting long poll
            self._changed.notify_all()
        if self._runner:
            await self._runner.cleanup()

    # --- the world

    @staticmethod
    def user(user_id: int, first_name: str, username: str | None = None, is_bot: bool = False) -> dict:
        """A Telegram User object."""
        u = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
        if username:
            u["username"] = username
        return u

    def private_chat(self, user: dict) -> dict:
        """The private chat between `user` and the bot."""
        chat = {"id": user["id"], "type": "private", "first_name": user["first_name"]}
        if "username" in user:
            chat["username"] = user["username"]
        self.chats[chat["id"]] = chat
        return chat

    def group(self, chat_id: int, title: str = "Test group", kind: str = "supergroup") -> dict:
        """A group or supergroup chat (ids are negative, as on Telegram)."""
        chat = {"id": chat_id, "type": kind, "title": title}
        self.chats[chat_id] = chat
        return chat

    def set_role(self, chat: dict | int, user: dict | int, status: str) -> None:
        """A user's status in a chat for getChatMember: creator, administrator, member, left."""
        cid = chat["id"] if isinstance(chat, dict) else chat
        uid = user["id"] if isinstance(user, dict) else user
        self.roles[(cid, uid)] = status

    def _next_message_id(self, chat_id: int) -> int:
        return next(self._message_ids.setdefault(chat_id, itertools.count(1)))

    # --- injecting updates

    def push_update(self, payload: dict) -> int:
        """Queue a raw update (without update_id); returns its update_id."""
        update = {"update_id": next(self._update_ids), **payload}
        self._updates.append(update)
        self._notify()
        self._webhook_wake.set()
        return update["update_id"]

    def send(
        self,
        chat: dict,
        user: dict,
        text: str | None = None,
        *,
        reply_to: dict | None = None,
        caption: str | None = None,
        kind: str | None = None,
        forward: bool = False,
        media: dict | None = None,
    ) -> dict:
        """A user sends a message: text, a `kind` like photo/sticker/voice (a placeholder file), or
        `media` with real files (`tg.files.voice(data)`, `tg.files.photo(...)`), with a caption."""
        msg: dict[str, Any] = {
            "message_id": self._next_message_id(chat["id"]),
            "from": user,
            "chat": chat,
            "date": int(time.time()),
        }
        if text is not None:
            msg["text"] = text
            if ents := detect_entities(text):
                msg["entities"] = ents
        if kind:
            msg.update(_media(kind))
        if media:
            msg.update(media)
        if caption is not None:
            msg["caption"] = caption
            if ents := detect_entities(caption):
                msg["caption_entities"] = ents
        if reply_to is not None:
            msg["reply_to_message"] = {k: v for k, v in reply_to.items() if k != "reply_to_message"}
        self.messages[(chat["id"], msg["message_id"])] = msg
        self.push_update({"message": msg})
        return msg

    def edit(self, message: dict, text: str) -> dict:
        """A user edits one of their messages: an edited_message update."""
        msg = {**message, "text": text, "edit_date": int(time.time())}
        msg.pop("entities", None)
        if ents := detect_entities(text):
            msg["entities"] = ents
        self.messages[(msg["chat"]["id"], msg["message_id"])] = msg
        self.push_update({"edited_message": msg})
        return msg

    def press(self, message: dict, user: dict, data: str) -> str:
        """A user presses an inline button of a bot message; returns the callback query id."""
        qid = str(next(self._callback_ids))
        query = {
            "id": qid,
            "from": user,
            "message": message,
            "data": data,
            "chat_instance": str(abs(message["chat"]["id"])),
        }
        self._callbacks[qid] = query
        self.push_update({"callback_query": query})
        return qid

    # --- faults

    def fail_next(
        self,
        method: str,
        error_code: int = 429,
        *,
        retry_after: int | None = None,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Make the next `times` calls of `method` fail (429 defaults to retry_after=1)."""
        params = None
        if error_code == 429:
            retry_after = 1 if retry_after is None else retry_after
            params = {"retry_after": retry_after}
            description = description or f"Too Many Requests: retry after {retry_after}"
        description = description or {
            400: "Bad Request",
            403: "Forbidden: bot was blocked by the user",
            500: "Internal Server Error",
            502: "Bad Gateway",
        }.get(error_code, "Error")
        self.faults.setdefault(method, []).append(Fault(error_code, description, params, times))

    # --- assertions

    def calls_to(self, method: str, chat_id: int | None = None, ok: bool | None = None) -> list[Call]:
        """Recorded calls of one method (optionally to one chat, optionally only ok/failed)."""
        return [
            c
            for c in self.calls
            if c.method == method
            and (chat_id is None or c.params.get("chat_id") == chat_id)
            and (ok is None or (c.status == 200) == ok)
        ]

    def bot_messages(self, chat_id: int) -> list[dict]:
        """Messages the bot has in a chat (current state, after edits), oldest first."""
        return [
            m
            for (cid, _), m in sorted(self.messages.items())
            if cid == chat_id and m.get("from", {}).get("id") == self.bot_user["id"]
        ]

    def pending_updates(self) -> int:
        """How many updates wait to be confirmed by the bot."""
        return len(self._updates)

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait (without sleeping blindly) until `predicate()` is truthy after some call; return it."""

        async def check() -> Any:
            async with self._changed:
                while not (result := predicate()):
                    await self._changed.wait()
                return result

        try:
            async with asyncio.timeout(timeout):  # not wait_for: it can swallow cancellation on 3.11
                return await check()
        except TimeoutError:
            raise AssertionError(
                f"timed out after {timeout}s waiting; calls: {[c.method for c in self.calls]}"
            ) from None

    async def wait_for_message(self, chat_id: int, count: int = 1, timeout: float = 10.0) -> list[dict]:
        """Wait until the bot has at least `count` messages in a chat; return them."""
        return await self.wait_until(
            lambda: (ms := self.bot_messages(chat_id)) and len(ms) >= count and ms, timeout
        )

    def _notify(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        task = asyncio.get_running_loop().create_task(notify())
        # Keep a reference until it ran: the loop holds tasks only weakly.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- HTTP

    async def _dispatch(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        call = Call(method, {})
        self.calls.append(call)
        try:
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            call.params, call.files = await _read_params(request)
            fault = self._take_fault(method)
            if fault:
                raise fault
            handler = getattr(self, "_m_" + method, None)
            if handler is None:
                raise ApiError(404, "Not Found: method not found")
            result = await handler(call.params, call.files)
            return web.json_response({"ok": True, "result": result})
        except ApiError as e:
            call.status = e.code
            return _error(e)
        finally:
            async with self._changed:
                self._changed.notify_all()

    def _take_fault(self, method: str) -> ApiError | None:
        queue = self.faults.get(method)
        if not queue:
            return None
        fault = queue[0]
        fault.times -= 1
        if fault.times <= 0:
            queue.pop(0)
        return ApiError(fault.error_code, fault.description, fault.parameters)

    def _chat(self, params: dict) -> dict:
        chat_id = params.get("chat_id")
        if chat_id is None:
            raise bad("chat_id is empty")
        chat = self.chats.get(chat_id)
        if chat is None and any(m.get("from", {}).get("id") == chat_id for m in self.messages.values()):
            # A user the bot has seen (in a group) but who never pressed Start: the real answer.
            raise ApiError(403, "Forbidden: bot can't initiate conversation with a user")
        if chat is None:
            raise bad("chat not found")
        return chat

    def _bot_message(self, chat: dict, **fields: Any) -> dict:
        msg = {
            "message_id": self._next_message_id(chat["id"]),
            "from": self.bot_user,
            "chat": chat,
            "date": int(time.time()),
            **fields,
        }
        self.messages[(chat["id"], msg["message_id"])] = msg
        return msg

    def _reply_to(self, chat: dict, params: dict) -> dict:
        rp = params.get("reply_parameters") or (
            {"message_id": params["reply_to_message_id"]} if params.get("reply_to_message_id") else None
        )
        if not rp:
            return {}
        target = self.messages.get((chat["id"], int(rp["message_id"])))
        if target is None:
            if rp.get("allow_sending_without_reply"):
                return {}
            raise bad("message to be replied not found")
        return {"reply_to_message": {k: v for k, v in target.items() if k != "reply_to_message"}}

    # --- methods

    async def _m_getMe(self, params: dict, files: dict) -> dict:
        return self.bot_user

    async def _m_logOut(self, params: dict, files: dict) -> bool:
        return True

    async def _m_close(self, params: dict, files: dict) -> bool:
        return True

    async def _m_getUpdates(self, params: dict, files: dict) -> list[dict]:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active;"
                " use deleteWebhook to delete the webhook first",
            )
        offset = params.get("offset") or 0
        limit = min(max(params.get("limit") or 100, 1), 100)
        timeout = max(float(params.get("timeout") or 0), 0.0)
        if params.get("allowed_updates") is not None:
            self.allowed_updates = params["allowed_updates"]  # remembered, as on the real server
        allowed = self.allowed_updates
        # A newer getUpdates ends an older one still waiting, as on the real server.
        async with self._changed:
            self._poll_generation += 1
            generation = self._poll_generation
            self._changed.notify_all()
        if offset:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]

        def ready() -> list[dict]:
            if allowed:  # kinds the bot did not ask for are never delivered
                self._updates = [u for u in self._updates if any(k in u for k in allowed)]
            return self._updates[:limit]

        deadline = time.monotonic() + timeout
        async with self._changed:
            while not (batch := ready()):
                if generation != self._poll_generation:
                    raise ApiError(
                        409,
                        "Conflict: terminated by other getUpdates request;"
                        " make sure that only one bot instance is running",
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                try:
                    async with asyncio.timeout(left):
                        await self._changed.wait()
                except TimeoutError:
                    return []
        return batch

    async def _m_deleteWebhook(self, params: dict, files: dict) -> bool:
        self.webhook_url = ""
        self.webhook_secret = None
        if params.get("drop_pending_updates") in (True, "true", "True"):
            self._updates.clear()
        return True

    async def _m_setWebhook(self, params: dict, files: dict) -> bool:
        url = params.get("url") or ""
        if url and not url.startswith(("https://", "http://127.0.0.1")):
            raise bad("bad webhook: An HTTPS URL must be provided for webhook")
        self.webhook_url = url
        self.webhook_secret = params.get("secret_token")
        if params.get("drop_pending_updates") in (True, "true", "True"):
            self._updates.clear()
        if url and self._webhook_task is None:
            self._webhook_task = asyncio.get_running_loop().create_task(self._deliver_webhooks())
        self._webhook_wake.set()
        return True

    async def _m_getWebhookInfo(self, params: dict, files: dict) -> dict:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }

    async def _m_sendMessage(self, params: dict, files: dict) -> dict:
        chat = self._chat(params)
        text = params.get("text")
        if not text or not str(text).strip():
            raise bad("message text is empty")
        # Telegram trims whitespace around a message (after entity parsing).
        plain = plain_text(str(text), params.get("parse_mode")).strip()
        if not plain:
            raise bad("message text is empty")
        if len(plain) > MAX_TEXT:
            raise bad("message is too long")
        fields: dict[str, Any] = {"text": plain, **self._reply_to(chat, params)}
        if params.get("parse_mode"):
            fields["sent_parse_mode"] = params["parse_mode"]  # kept for assertions, not sent by Telegram
            fields["sent_text"] = text
        if params.get("reply_markup"):
            fields["reply_markup"] = params["reply_markup"]
        msg = self._bot_message(chat, **fields)
        return {k: v for k, v in msg.items() if not k.startswith("sent_")}

    async def _m_editMessageText(self, params: dict, files: dict) -> dict | bool:
        if params.get("inline_message_id"):
            return True
        chat = self._chat(params)
        key = (chat["id"], params.get("message_id"))
        msg = self.messages.get(key)
        if msg is None:
            raise bad("message to edit not found")
        if msg.get("from", {}).get("id") != self.bot_user["id"]:
            raise bad("message can't be edited")
        text = params.get("text")
        if not text:
            raise bad("message text is empty")
        plain = plain_text(str(text), params.get("parse_mode")).strip()
        if not plain:
            raise bad("message text is empty")
        if len(plain) > MAX_TEXT:
            raise bad("message is too long")
        markup = params.get("reply_markup")
        if plain == msg.get("text") and markup == msg.get("reply_markup"):
            raise bad(
                "message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message"
            )
        msg = {**msg, "text": plain, "edit_date": int(time.time())}
        if markup:
            msg["reply_markup"] = markup
        else:
            msg.pop("reply_markup", None)
        self.messages[key] = msg
        return {k: v for k, v in msg.items() if not k.startswith("sent_")}

    async def _m_deleteMessage(self, params: dict, files: dict) -> bool:
        chat = self._chat(params)
        if self.messages.pop((chat["id"], params.get("message_id")), None) is None:
            raise bad("message to delete not found")
        return True

    async def _m_sendChatAction(self, params: dict, files: dict) -> bool:
        self._chat(params)
        if params.get("action") not in _CHAT_ACTIONS:
            raise bad("wrong parameter action in request")
        return True

    async def _m_sendPhoto(self, params: dict, files: dict) -> dict:
        chat = self._chat(params)
        photo = files.get("photo")
        if photo is None:
            ref = params.get("photo")
            if isinstance(ref, str) and ref.startswith("attach://"):
                photo = files.get(ref.removeprefix("attach://"))
            if photo is None:
                raise bad("there is no photo in the request")
        if not photo.startswith(b"\x89PNG\r\n\x1a\n") and not photo.startswith(b"\xff\xd8"):
            raise bad("IMAGE_PROCESS_FAILED")
        caption = params.get("caption")
        fields: dict[str, Any] = {
            "photo": [
                {
                    "file_id": f"photo{len(self.photos)}",
                    "file_unique_id": f"u{len(self.photos)}",
                    "width": 640,
                    "height": 480,
                    "file_size": len(photo),
                }
            ],
            **self._reply_to(chat, params),
        }
        if caption:
            plain = plain_text(str(caption), params.get("parse_mode"))
            if len(plain) > MAX_CAPTION:
                raise bad("message caption is too long")
            fields["caption"] = plain
        self.photos.append(photo)
        return self._bot_message(chat, **fields)

    async def _m_sendDocument(self, params: dict, files: dict) -> dict:
        chat = self._chat(params)
        upload = files.get("document")
        ref = params.get("document")
        if upload is None and isinstance(ref, str) and ref.startswith("attach://"):
            upload = files.get(ref.removeprefix("attach://"))
        if upload is None:
            raise bad("there is no document in the request")
        if len(upload) > MAX_UPLOAD:
            raise ApiError(413, "Request Entity Too Large")
        if not upload:
            raise bad("file must be non-empty")
        name = getattr(upload, "filename", None) or "document"
        document = Document(chat["id"], name, bytes(upload))
        self.documents.append(document)
        fields: dict[str, Any] = {
            "document": {
                "file_id": f"document{len(self.documents)}",
                "file_unique_id": f"d{len(self.documents)}",
                "file_name": name,
                "file_size": len(upload),
            },
            **self._reply_to(chat, params),
        }
        if params.get("caption"):
            fields["caption"] = plain_text(str(params["caption"]), params.get("parse_mode"))
        return self._bot_message(chat, **fields)

    async def _m_setMyCommands(self, params: dict, files: dict) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise bad('parameter "commands" is required')
        if len(commands) > 100:
            raise bad("BOT_COMMANDS_TOO_MUCH")
        for c in commands:
            if not _COMMAND_NAME.match(str(c.get("command", ""))):
                raise bad("BOT_COMMAND_INVALID")
            if not 1 <= len(str(c.get("description", "")).strip()) <= 256:
                raise bad("BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands[_scope_key(params)] = commands
        return True

    async def _m_getMyCommands(self, params: dict, files: dict) -> list[dict]:
        return self.commands.get(_scope_key(params), [])

    async def _m_deleteMyCommands(self, params: dict, files: dict) -> bool:
        self.commands.pop(_scope_key(params), None)
        return True

    async def _m_getFile(self, params: dict, files: dict) -> dict:
        try:
            return self.files.get_file(str(params.get("file_id") or ""))
        except FileRefused as exc:
            raise bad(str(exc).removeprefix("Bad Request: ")) from None

    async def _m_getChatMember(self, params: dict, files: dict) -> dict:
        chat = self._chat(params)
        user_id = params.get("user_id")
        if not isinstance(user_id, int):
            raise bad("invalid user_id specified")
        status = self.roles.get((chat["id"], user_id), "member")
        user = next(
            (m["from"] for m in self.messages.values() if m.get("from", {}).get("id") == user_id),
            {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
        )
        return _member(status, user)

    async def _m_answerCallbackQuery(self, params: dict, files: dict) -> bool:
        qid = str(params.get("callback_query_id") or "")
        if self._callbacks.pop(qid, None) is None:
            raise bad("query is too old and response timeout expired or query ID is invalid")
        return True

    # --- webhook delivery

    async def _deliver_webhooks(self) -> None:
        """POST pending updates to the webhook, one at a time, retrying like Telegram does."""
        async with aiohttp.ClientSession() as session:
            while True:
                await self._webhook_wake.wait()
                self._webhook_wake.clear()
                while self.webhook_url and self._updates:
                    update = self._updates[0]
                    headers = (
                        {"X-Telegram-Bot-Api-Secret-Token": self.webhook_secret}
                        if self.webhook_secret
                        else {}
                    )
                    try:
                        async with session.post(self.webhook_url, json=update, headers=headers) as resp:
                            delivered = resp.status == 200
                    except aiohttp.ClientError:
                        delivered = False
                    self.calls.append(
                        Call("webhook", {"update_id": update["update_id"]}, status=200 if delivered else 502)
                    )
                    if delivered:
                        self._updates.pop(0)
                        self._notify()
                    else:
                        # The real server retries later; tests get a prompt retry.
                        try:
                            async with asyncio.timeout(0.2):
                                await self._webhook_wake.wait()
                        except TimeoutError:
                            pass
                        self._webhook_wake.clear()


def _media(kind: str) -> dict:
    """The field a non-text message carries, with the minimal valid shape of each kind."""
    fid = {"file_id": f"{kind}-file", "file_unique_id": f"{kind}-unique"}
    shapes = {
        "photo": {"photo": [{**fid, "width": 90, "height": 90}]},
        "sticker": {
            "sticker": {
                **fid,
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
            }
        },
        "voice": {"voice": {**fid, "duration": 3}},
        "document": {"document": {**fid, "file_name": "notes.txt"}},
        "video": {"video": {**fid, "width": 320, "height": 240, "duration": 5}},
        "location": {"location": {"latitude": 48.85, "longitude": 2.35}},
    }
    return shapes[kind]


def _member(status: str, user: dict) -> dict:
    """A ChatMember object with the fields PTB requires for each status."""
    if status == "creator":
        return {"status": "creator", "user": user, "is_anonymous": False}
    if status == "administrator":
        rights = dict.fromkeys(
            [
                "can_manage_chat",
                "can_delete_messages",
                "can_manage_video_chats",
                "can_restrict_members",
                "can_promote_members",
                "can_change_info",
                "can_invite_users",
                "can_post_stories",
                "can_edit_stories",
                "can_delete_stories",
            ],
            True,
        )
        return {
            "status": "administrator",
            "user": user,
            "can_be_edited": False,
            "is_anonymous": False,
            **rights,
        }
    if status == "left":
        return {"status": "left", "user": user}
    return {"status": "member", "user": user}


def _scope_key(params: dict) -> tuple[str, str]:
    scope = params.get("scope") or {"type": "default"}
    return json.dumps(scope, sort_keys=True), params.get("language_code") or ""


def _error(e: ApiError) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": e.code, "description": e.description}
    if e.parameters:
        body["parameters"] = e.parameters
    return web.json_response(body, status=e.code)


class Upload(bytes):
    """An uploaded file's bytes, with the file name the client gave."""

    filename: str = ""


@dataclass(frozen=True)
class Document:
    """A file the bot sent with sendDocument."""

    chat_id: int
    name: str
    data: bytes


async def _read_params(request: web.Request) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Parameters from the query, a JSON body, a form or a multipart body, typed like the server does."""
    raw: dict[str, Any] = dict(request.query)
    files: dict[str, bytes] = {}
    ctype = request.content_type
    if ctype == "application/json":
        body = await request.read()
        if body:
            raw.update(json.loads(body))
    elif ctype == "multipart/form-data":
        reader = await request.multipart()
        async for part in reader:
            if part.filename is not None:
                upload = Upload(await part.read())
                upload.filename = part.filename
                files[part.name] = upload
            else:
                raw[part.name] = await part.text()
    elif request.can_read_body:
        raw.update(await request.post())
    params: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, str) and key in _JSON_FIELDS:
            try:
                value = json.loads(value)
            except ValueError:
                raise bad(f"can't parse {key} JSON object") from None
        elif isinstance(value, str) and key in _INT_FIELDS:
            with contextlib.suppress(ValueError):
                value = int(value)
        params[key] = value
    return params, files
