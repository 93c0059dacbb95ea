"""The fake Bot API's methods on chats and messages: send, edit, delete, files, commands, members."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from tests.fakes.telegram_errors import ApiError, bad
from tests.fakes.telegram_files import FileRefused
from tests.fakes.telegram_markup import plain_text
from tests.fakes.telegram_world import Document, TelegramWorld

MAX_TEXT = 4096
MAX_CAPTION = 1024
MAX_UPLOAD = 50 * 1000 * 1000  # what the Bot API takes from a bot per file
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


def _message_text(params: dict) -> str:
    """The `text` of sendMessage/editMessageText as Telegram shows it; refused when empty or too long."""
    text = params.get("text")
    # Telegram trims whitespace around a message (after entity parsing).
    plain = plain_text(str(text), params.get("parse_mode")).strip() if text else ""
    if not plain:
        raise bad("message text is empty")
    if len(plain) > MAX_TEXT:
        raise bad("message is too long")
    return plain


class ChatMethods(TelegramWorld):
    """sendMessage, editMessageText, deleteMessage, sendChatAction, sendPhoto, sendDocument, the
    command methods, getFile, getChatMember and answerCallbackQuery."""

    async def _m_sendMessage(self, params: dict, files: dict) -> dict:
        chat = self._chat(params)
        text = params.get("text")
        plain = _message_text(params)
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
        plain = _message_text(params)
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
