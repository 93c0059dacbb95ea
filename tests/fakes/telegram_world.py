"""The fake Bot API's world: users, chats, messages and roles, injected updates, faults and the call log."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.telegram_errors import ApiError, bad
from tests.fakes.telegram_files import FileStore
from tests.fakes.telegram_markup import detect_entities

TOKEN = "123456:TEST-token_for-the-fake"


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


@dataclass(frozen=True)
class Document:
    """A file the bot sent with sendDocument."""

    chat_id: int
    name: str
    data: bytes


class TelegramWorld:
    """The state of the fake Bot API server and what tests do with it; the methods are in mixins."""

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

        try:
            async with asyncio.timeout(timeout):  # not wait_for: it can swallow cancellation on 3.11
                async with self._changed:
                    return await self._changed.wait_for(predicate)
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
