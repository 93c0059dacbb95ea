"""The owner's actions on a chat: each is one call of the memory API's route table, as a chat command's."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from memory_engine.dashboard.app import Dashboard

ACTIONS = (
    "forget_fact",
    "remove_note",
    "cancel_reminder",
    "persona",
    "compact",
    "forget_person",
    "forget_chat",
)
MAX_PERSONA_CHARS = 2000


class DashboardError(Exception):
    """A refusal or a failure, with the HTTP status the page is answered with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _id(form: dict[str, str], name: str) -> int:
    value = form.get(name, "")
    if not value.isdigit() or not 0 < int(value) < 2**62:
        raise DashboardError(400, f"{name} must be a number.")
    return int(value)


def _confirmed(form: dict[str, str]) -> None:
    if form.get("confirm") != "yes":
        raise DashboardError(400, "Tick the box to confirm: nothing was changed.")


async def do_action(dash: Dashboard, chat_key: str, name: str, form: dict[str, str]) -> None:
    """Run the action `name` on the chat (a DashboardError when it is refused)."""
    c = "/v1/chats/" + quote(chat_key, safe=":")
    if name in ("forget_fact", "remove_note"):  # the route /forgetfact and /forget of notes use
        await dash.api("DELETE", f"{c}/facts/{_id(form, 'fact_id')}")
    elif name == "cancel_reminder":
        _confirmed(form)
        await dash.api("DELETE", f"{c}/reminders/{_id(form, 'reminder_id')}")
    elif name == "persona":
        persona = form.get("persona", "")
        if len(persona) > MAX_PERSONA_CHARS:
            raise DashboardError(400, f"The persona is longer than {MAX_PERSONA_CHARS} characters.")
        await dash.api("PUT", f"{c}/settings", body={"persona": persona})
    elif name == "compact":
        await dash.api("POST", f"{c}/compact")
    elif name == "forget_person":
        _confirmed(form)
        author_id = form.get("author_id", "")
        if not author_id:
            raise DashboardError(400, "Whom to forget?")
        await dash.api("DELETE", f"{c}/authors/{quote(author_id, safe='')}")
    elif name == "forget_chat":
        listed = await dash.api("POST", "/v1/directory/list", body={"chats": [chat_key]})
        title = (listed["chats"][0]["title"] if listed["chats"] else "") or chat_key
        if form.get("confirm_title", "").strip() != title:
            raise DashboardError(400, "The title you typed does not match: nothing was forgotten.")
        await dash.api("DELETE", c)
