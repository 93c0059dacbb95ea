"""Who gets into the dashboard: signed sessions, CSRF tokens, one-time login links.

Everything is signed with HMAC-SHA256 under a key derived from the memory API token, so
changing the token ends every session and voids every link. A session is a signed cookie
naming a session id that the directory object keeps (logout deletes it: a copied cookie
is dead from then on). A link names its role (the owner, or a chat admin with the chat
keys they may see), its expiry and a nonce the directory lets through once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

COOKIE = "chatbot_dashboard"
SESSION_MS = 8 * 3600 * 1000
LINK_MINUTES = 10
OWNER = "owner"
ADMIN = "admin"
_KEY_LABEL = b"chatbot dashboard v1"


@dataclass(frozen=True)
class Session:
    """A logged-in browser: its id, role, who it is (for the log), the chats it may see (None: all)."""

    sid: str
    role: str
    who: str
    chats: tuple[str, ...] | None
    expires_ms: int

    def may_see(self, chat_key: str) -> bool:
        """True when this session may open `chat_key`."""
        return self.chats is None or chat_key in self.chats


@dataclass(frozen=True)
class Link:
    """A verified one-time login link."""

    nonce: str
    role: str
    who: str
    chats: tuple[str, ...] | None
    expires_ms: int


def derive_key(token: str) -> bytes:
    """The dashboard's signing key: never the token itself (a leaked cookie reveals nothing of it)."""
    return hmac.new(token.encode("utf-8"), _KEY_LABEL, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(key: bytes, purpose: str, payload: dict[str, Any]) -> str:
    """`payload` as a signed string for `purpose` (a session cannot be used as a link, nor back)."""
    body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8"))
    mac = hmac.new(key, f"{purpose}.{body}".encode("ascii"), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}"


def unsign(key: bytes, purpose: str, signed: str) -> dict[str, Any] | None:
    """The payload of a string `sign` made for `purpose` under `key`; None when forged or malformed."""
    body, _, mac = signed.partition(".")
    if not body or not mac or len(signed) > 8192:
        return None
    try:
        want = hmac.new(key, f"{purpose}.{body}".encode("ascii"), hashlib.sha256).digest()
        if not hmac.compare_digest(want, _unb64(mac)):
            return None
        payload = json.loads(_unb64(body))
    except (ValueError, UnicodeError, binascii.Error):
        return None
    return payload if isinstance(payload, dict) else None


def _chats(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(c, str) for c in value):
        return tuple(value)
    raise ValueError("chats")


def new_session(
    key: bytes, role: str, who: str, chats: tuple[str, ...] | None, now_ms: int
) -> tuple[Session, str]:
    """A fresh session and its signed cookie value."""
    session = Session(secrets.token_urlsafe(18), role, who, chats, now_ms + SESSION_MS)
    payload = {
        "sid": session.sid,
        "role": role,
        "who": who,
        "chats": chats and list(chats),
        "exp": session.expires_ms,
    }
    return session, sign(key, "session", payload)


def read_session(key: bytes, cookie_value: str, now_ms: int) -> Session | None:
    """The session a cookie names when it is signed by us and not expired (the caller checks it is live)."""
    p = unsign(key, "session", cookie_value)
    try:
        if p is None or int(p["exp"]) <= now_ms or p["role"] not in (OWNER, ADMIN):
            return None
        return Session(str(p["sid"]), str(p["role"]), str(p["who"]), _chats(p.get("chats")), int(p["exp"]))
    except (KeyError, TypeError, ValueError):
        return None


def make_link(
    token: str,
    base_url: str,
    now_ms: int,
    role: str = OWNER,
    who: str = OWNER,
    chats: tuple[str, ...] | None = None,
    minutes: float = LINK_MINUTES,
) -> str:
    """A one-time login link to the dashboard at `base_url` (the memory worker's URL), valid `minutes`."""
    payload = {
        "nonce": secrets.token_urlsafe(12),
        "role": role,
        "who": who,
        "chats": chats and list(chats),
        "exp": now_ms + int(minutes * 60_000),
    }
    return f"{base_url.rstrip('/')}/dashboard/login?link={quote(sign(derive_key(token), 'link', payload))}"


def read_link(key: bytes, signed: str, now_ms: int) -> Link | None:
    """The link when signed by us and not expired (the caller redeems its nonce once)."""
    p = unsign(key, "link", signed)
    try:
        if p is None or int(p["exp"]) <= now_ms or p["role"] not in (OWNER, ADMIN):
            return None
        chats = _chats(p.get("chats"))
        if p["role"] == ADMIN and not chats:
            return None  # an admin's link names the chats it opens
        return Link(str(p["nonce"]), str(p["role"]), str(p["who"]), chats, int(p["exp"]))
    except (KeyError, TypeError, ValueError):
        return None


def csrf_token(key: bytes, session: Session) -> str:
    """The CSRF token of every form of this session (bound to its id: another session's is refused)."""
    return _b64(hmac.new(key, f"csrf.{session.sid}".encode("ascii"), hashlib.sha256).digest()[:18])


def csrf_ok(key: bytes, session: Session, given: str | None) -> bool:
    """True when `given` is this session's CSRF token (constant-time)."""
    return bool(given) and hmac.compare_digest(csrf_token(key, session).encode(), str(given).encode())


def token_ok(token: str, given: str) -> bool:
    """True when `given` is the memory API token (constant-time, as the API checks it)."""
    return bool(token) and hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def cookie_of(header: str | None) -> str | None:
    """Our cookie's value in a `Cookie` header."""
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def set_cookie(value: str, secure: bool, max_age_s: int) -> str:
    """A `Set-Cookie` value for our cookie: HttpOnly, SameSite=Strict, Secure over https."""
    flags = f"; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age={max_age_s}"
    return f"{COOKIE}={value}{flags}{'; Secure' if secure else ''}"
