"""The dashboard's routes: the login, the pages and the actions, as a pure function of a request.

A host (the local host, the Worker) hands each `/dashboard` request to `handle` with a
`Backend`: the memory API token and a way to call the API's route table. Every read and
every action is such a call, so the dashboard writes exactly as the chat commands do. The
login state (sessions, used links, attempts) lives in the directory object.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qs, quote, unquote

from memory_engine.api import http_types  # its CHAT_KEY (a pattern checked where it is defined)
from memory_engine.dashboard import auth, pages
from memory_engine.dashboard.actions import ACTIONS, DashboardError, do_action
from memory_engine.dashboard.auth import Session
from memory_engine.dashboard.chat_pages import ChatData, chat_page, find_person, person_page
from memory_engine.dashboard.markup import Html
from memory_engine.dashboard.wire import AuthRequest, DirectoryQuery

log = logging.getLogger("memory_engine.dashboard")
LOGIN_LIMIT = 10  # login attempts a client may make per window
LOGIN_WINDOW_MS = 15 * 60 * 1000
MAX_FORM_BYTES = 64 * 1024
SEARCH_K = 8
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


@dataclass(frozen=True)
class DashRequest:
    """One HTTP request to the dashboard, as a host sees it."""

    method: str
    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    client: str = ""  # the caller's address (login attempts are counted by it)
    secure: bool = False  # reached over https: the cookie is then Secure


@dataclass
class DashResponse:
    """The answer: status, headers, body."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)


class Backend(Protocol):
    """What a host gives the dashboard: the API token, the API itself, the clock."""

    token: str

    async def call(self, method: str, path: str, query: str = "", body: object = None) -> tuple[int, Any]:
        """One call of the memory API with the token: (status, JSON answer)."""
        ...

    def now_ms(self) -> int:
        """The current time in ms."""
        ...


def is_dashboard(path: str) -> bool:
    """True when `path` belongs to the dashboard."""
    return path == pages.BASE or path.startswith(pages.BASE + "/")


def _headers(content_type: str) -> list[tuple[str, str]]:
    return [
        ("content-type", content_type),
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        # Not "no-referrer": a browser then sends `Origin: null` with our own forms.
        ("referrer-policy", "same-origin"),
        ("cache-control", "no-store"),
    ]


def page(status: int, body: Html, cookie: str | None = None) -> DashResponse:
    """An HTML answer with the dashboard's security headers."""
    headers = _headers("text/html; charset=utf-8")
    if cookie is not None:
        headers.append(("set-cookie", cookie))
    return DashResponse(status, body.encode("utf-8"), headers)


def redirect(to: str, cookie: str | None = None) -> DashResponse:
    """A 303 to a dashboard URL."""
    response = page(303, Html(""), cookie)
    response.headers.append(("location", to))
    return response


def _form(req: DashRequest) -> dict[str, str]:
    if len(req.body) > MAX_FORM_BYTES:
        raise DashboardError(413, "The form is too large.")
    try:
        parsed = parse_qs(req.body.decode("utf-8"), keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise DashboardError(400, "The form is not valid UTF-8.") from None
    return {k: v[-1] for k, v in parsed.items()}


def _query(req: DashRequest) -> dict[str, str]:
    try:
        return {k: v[-1] for k, v in parse_qs(req.query, keep_blank_values=True, errors="strict").items()}
    except (UnicodeDecodeError, ValueError):
        return {}


class Dashboard:
    """One request's work: its backend, key and session."""

    def __init__(self, req: DashRequest, backend: Backend):
        self.req = req
        self.backend = backend
        self.key = auth.derive_key(backend.token)
        self.session: Session | None = None
        self.csrf = ""

    async def api(self, method: str, path: str, query: str = "", body: object = None) -> Any:
        """One API call; its answer, or a DashboardError saying what failed."""
        status, data = await self.backend.call(method, path, query, body)
        if status != 200:
            message = data.get("error") if isinstance(data, dict) else None
            raise DashboardError(status, str(message or f"the memory answered {status}"))
        return data

    async def auth_step(self, action: str, key: str, until: int = 0, limit: int | None = None) -> bool:
        """One step of the login state in the directory object."""
        body: AuthRequest = {"action": action, "key": key, "until": until, "now": self.backend.now_ms()}
        if limit is not None:
            body["limit"] = limit
        return bool((await self.api("POST", "/v1/directory/auth", body=body))["ok"])

    async def load_session(self) -> Session | None:
        """The request's live session, if any."""
        value = auth.cookie_of(self.req.headers.get("cookie"))
        if not value:
            return None
        session = auth.read_session(self.key, value, self.backend.now_ms())
        if session is None or not await self.auth_step("check", session.sid):
            return None
        self.session, self.csrf = session, auth.csrf_token(self.key, session)
        return session

    async def run(self) -> DashResponse:
        """Answer the request."""
        req = self.req
        method = req.method.upper()
        rest = req.path[len(pages.BASE) :].strip("/")
        parts = [unquote(p) for p in rest.split("/")] if rest else []
        if parts == ["style.css"] and method in ("GET", "HEAD"):
            response = DashResponse(200, pages.CSS.encode("utf-8"), _headers("text/css; charset=utf-8"))
            response.headers[-1] = ("cache-control", "max-age=3600")
            return response
        if not self.backend.token:  # no token, no key: nothing could be signed safely
            return page(503, pages.error_page(503, "The memory API token is not set: the dashboard is off."))
        if parts == ["login"]:
            return await self.login(method)
        if method == "POST" and not self._same_origin():
            return page(403, pages.error_page(403, "Refused: the form came from another site."))
        session = await self.load_session()
        if session is None:  # no page, no action without a session
            return page(401, pages.login_page("Log in first." if parts != [] else ""))
        if method == "POST":
            form = _form(req)
            if not auth.csrf_ok(self.key, session, form.get("csrf")):
                return page(
                    403,
                    pages.error_page(
                        403,
                        "Refused: this form is stale or not from this page. Reload and try again.",
                        session,
                        self.csrf,
                    ),
                )
            if parts == ["logout"]:
                return await self.logout()
            if len(parts) == 3 and parts[0] == "chat" and parts[2] == "do":
                return await self.action(parts[1], form)
            return page(404, pages.error_page(404, "No such page.", session, self.csrf))
        if method not in ("GET", "HEAD"):
            return page(405, pages.error_page(405, "Use GET or POST.", session, self.csrf))
        flash = _query(req).get("done", "")
        if not parts:
            return await self.overview(flash)
        if parts[0] == "chat" and len(parts) >= 2:
            return await self.chat_route(parts[1], parts[2:], flash)
        return page(404, pages.error_page(404, "No such page.", session, self.csrf))

    def _same_origin(self) -> bool:
        """A browser's POST names its origin; one from another site is refused (with the CSRF token)."""
        origin = self.req.headers.get("origin")
        host = self.req.headers.get("host")
        if not origin or origin == "null" or not host:
            return origin != "null"
        return origin.split("://", 1)[-1] == host

    # -- login ---------------------------------------------------------------------------------

    async def login(self, method: str) -> DashResponse:
        """The login page, and the token or one-time link it takes."""
        if method != "POST":
            return page(200, pages.login_page(link=_query(self.req).get("link", "")))
        if not self._same_origin():
            return page(403, pages.error_page(403, "Refused: the form came from another site."))
        form = _form(self.req)
        now = self.backend.now_ms()
        client = self.req.client or "unknown"
        if not await self.auth_step("attempt", f"login:{client}", now + LOGIN_WINDOW_MS, LOGIN_LIMIT):
            log.warning("dashboard login refused: too many attempts client=%s", client)
            return page(429, pages.login_page("Too many attempts: wait a few minutes."))
        if form.get("link"):
            link = auth.read_link(self.key, form["link"], now)
            if link is None or not await self.auth_step("redeem", f"link:{link.nonce}", link.expires_ms):
                log.warning("dashboard login refused: a forged, expired or used link client=%s", client)
                return page(
                    401,
                    pages.login_page("This link is not valid: it expired, was used already, or is not ours."),
                )
            role, who, chats = link.role, link.who, link.chats
        elif auth.token_ok(self.backend.token, form.get("token", "")):
            role, who, chats = auth.OWNER, auth.OWNER, None
        else:
            log.warning("dashboard login refused: wrong token client=%s", client)
            return page(401, pages.login_page("Wrong token."))
        session, value = auth.new_session(self.key, role, who, chats, now)
        await self.auth_step("start", session.sid, session.expires_ms)
        log.info("dashboard login role=%s who=%s chats=%s", role, who, ",".join(chats or ()) or "all")
        cookie = auth.set_cookie(value, self.req.secure, auth.SESSION_MS // 1000)
        to = pages.chat_url(chats[0]) if chats and len(chats) == 1 else pages.BASE
        return redirect(to, cookie)

    async def logout(self) -> DashResponse:
        """End the session here and in the directory: the cookie is dead even if copied."""
        assert self.session is not None
        await self.auth_step("end", self.session.sid)
        log.info("dashboard logout who=%s", self.session.who)
        return redirect(pages.BASE + "/login", auth.set_cookie("", self.req.secure, 0))

    # -- pages ---------------------------------------------------------------------------------

    def today(self) -> str:
        """Today's UTC date."""
        return datetime.fromtimestamp(self.backend.now_ms() / 1000, UTC).date().isoformat()

    async def overview(self, flash: str) -> DashResponse:
        """Every chat this session may see."""
        assert self.session is not None
        body: DirectoryQuery = {} if self.session.chats is None else {"chats": list(self.session.chats)}
        directory = await self.api("POST", "/v1/directory/list", body=body)
        q = _query(self.req).get("q", "")
        return page(200, pages.overview(directory, self.today(), q, self.session, self.csrf, flash))

    async def chat_data(self, chat_key: str, author_id: str | None = None) -> ChatData:
        """Everything a chat page shows, read through the API (in parallel: one call each)."""
        c = "/v1/chats/" + quote(chat_key, safe=":")
        who = "author_id=" + quote(author_id, safe="") if author_id else ""
        calls = [
            self.api("GET", c + "/stats"),
            self.api("GET", c + "/summary"),
            self.api("GET", c + "/people", who),
            self.api("GET", c + "/facts", "history=1"),
            self.api("GET", c + "/notes"),
            self.api("GET", c + "/reminders", who),
            self.api("GET", c + "/settings"),
            self.api("GET", c + "/usage", who),
            self.api("POST", "/v1/directory/list", body={"chats": [chat_key]}),
        ]
        stats, summary, people, facts, notes, reminders, settings, usage, directory = await asyncio.gather(
            *calls
        )
        entry = directory["chats"][0] if directory["chats"] else {}
        return ChatData(
            chat_key=chat_key,
            title=entry.get("title", ""),
            today=self.today(),
            stats=stats,
            summary=summary,
            people=people["people"],
            sources=people["sources"],
            facts=facts["facts"],
            notes=notes["notes"],
            reminders=reminders["reminders"],
            settings=settings,
            usage=usage,
            days=directory["days"],
        )

    async def chat_route(self, chat_key: str, rest: list[str], flash: str) -> DashResponse:
        """A chat's page, a person's page, a message in context, an export."""
        assert self.session is not None
        if not http_types.CHAT_KEY.match(chat_key) or not self.session.may_see(chat_key):
            return page(404, pages.error_page(404, "No such chat here.", self.session, self.csrf))
        c = "/v1/chats/" + quote(chat_key, safe=":")
        if not rest:
            data = await self.chat_data(chat_key)
            query = _query(self.req).get("q", "").strip()
            if query:
                data.query, data.search = query, await self.search(chat_key, query)
            return page(200, chat_page(data, self.session, self.csrf, flash))
        if rest == ["export"]:
            return await self.export(chat_key, None)
        if len(rest) == 2 and rest[0] == "message" and rest[1].isdigit():
            around, directory = await asyncio.gather(
                self.api("GET", f"{c}/messages/{int(rest[1])}/around", "n=4"),
                self.api("POST", "/v1/directory/list", body={"chats": [chat_key]}),
            )
            title = directory["chats"][0]["title"] if directory["chats"] else ""
            return page(200, pages.message_page(chat_key, title, around, self.session, self.csrf))
        if len(rest) in (2, 3) and rest[0] == "person":
            if rest[2:] == ["export"]:
                return await self.export(chat_key, rest[1])
            if len(rest) == 2:
                data = await self.chat_data(chat_key, rest[1])
                person = find_person(data.people, rest[1])
                if person is None:
                    return page(
                        404,
                        pages.error_page(
                            404, "This chat does not know that person.", self.session, self.csrf
                        ),
                    )
                return page(200, person_page(data, person, self.session, self.csrf, flash))
        return page(404, pages.error_page(404, "No such page.", self.session, self.csrf))

    async def search(self, chat_key: str, query: str) -> Html:
        """The bot's own search of the chat, each hit with the messages around it."""
        c = "/v1/chats/" + quote(chat_key, safe=":")
        found = await self.api("GET", c + "/search", f"q={quote(query[:500])}&k={SEARCH_K}")
        hits = found["results"]
        arounds = await asyncio.gather(
            *(self.api("GET", f"{c}/messages/{int(h['id'])}/around", "n=2") for h in hits)
        )
        return pages.hits(chat_key, query, list(zip(hits, arounds, strict=True)))

    async def export(self, chat_key: str, author_id: str | None) -> DashResponse:
        """The chat's (or one person's) export, every page of it, as one JSON download."""
        assert self.session is not None
        c = "/v1/chats/" + quote(chat_key, safe=":")
        base = "author_id=" + quote(author_id, safe="") if author_id else ""
        first = await self.api("GET", c + "/export", base)
        whole = dict(first)
        messages = list(first.get("messages", []))
        after, upto = first.get("next_after"), first.get("export", {}).get("upto")
        while after:
            q = "&".join(x for x in (base, f"after={after}", f"upto={upto}" if upto else "") if x)
            more = await self.api("GET", c + "/export", q)
            messages += more.get("messages", [])
            after = more.get("next_after")
        whole["messages"], whole["next_after"] = messages, None
        log.info("dashboard export chat=%s person=%s by=%s", chat_key, author_id or "-", self.session.who)
        name = "person" if author_id else "chat"
        headers = _headers("application/json; charset=utf-8")
        headers.append(("content-disposition", f'attachment; filename="{name}-export.json"'))
        return DashResponse(200, json.dumps(whole, ensure_ascii=False, indent=1).encode("utf-8"), headers)

    async def action(self, chat_key: str, form: dict[str, str]) -> DashResponse:
        """One action on a chat, through the API's own operations; logged with who did it."""
        assert self.session is not None
        if not http_types.CHAT_KEY.match(chat_key) or not self.session.may_see(chat_key):
            return page(404, pages.error_page(404, "No such chat here.", self.session, self.csrf))
        name = form.get("action", "")
        if name not in ACTIONS:
            return page(400, pages.error_page(400, "Unknown action.", self.session, self.csrf))
        try:
            await do_action(self, chat_key, name, form)
        except DashboardError as err:
            return page(err.status, pages.error_page(err.status, err.message, self.session, self.csrf))
        log.info(
            "dashboard action=%s chat=%s by=%s role=%s", name, chat_key, self.session.who, self.session.role
        )
        back = form.get("back", "")
        if name == "forget_chat":
            back = pages.BASE
        elif not back.startswith(pages.BASE + "/") or "//" in back or "\\" in back:
            back = pages.chat_url(chat_key)
        return redirect(f"{back}?done={name}")


async def handle(req: DashRequest, backend: Backend) -> DashResponse:
    """Answer one `/dashboard` request."""
    dash = Dashboard(req, backend)
    try:
        response = await dash.run()
    except DashboardError as err:
        response = page(err.status, pages.error_page(err.status, err.message, dash.session, dash.csrf))
    if req.method.upper() == "HEAD":
        response.body = b""
    return response
