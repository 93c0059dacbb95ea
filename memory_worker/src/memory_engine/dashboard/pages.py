"""The dashboard's page shell, its login page, the overview and a message in its context.

Every page is `html` fragments: values escaped unless made here. No script anywhere; forms
post to the same origin with the session's CSRF token.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import quote

from memory_engine.dashboard.auth import Session
from memory_engine.dashboard.charts import usage_chart
from memory_engine.dashboard.markup import Html, esc, html, join, trusted
from memory_engine.dashboard.wire import AroundAnswer, DirectoryAnswer

BASE = "/dashboard"
CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f8}
header{display:flex;gap:1em;align-items:center;padding:.6em 1.2em;background:#1f2937;color:#fff}
header a,header button.link{color:#fff}
header .grow{flex:1}
main{max-width:1100px;margin:1.2em auto;padding:0 1.2em}
h1{font-size:1.5em;margin:.2em 0 .6em}
h2{font-size:1.15em;margin:1.4em 0 .5em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1em;margin:1em 0 .3em}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:.35em .6em;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f0f0f3;font-weight:600}
td.n,th.n{text-align:right}
.muted{color:#6b7280;font-size:.9em}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:6px;padding:.8em 1em;margin:.6em 0}
.flash{background:#ecfdf5;border:1px solid #34d399;padding:.5em .8em;border-radius:6px}
.error{background:#fef2f2;border:1px solid #f87171;padding:.5em .8em;border-radius:6px}
form.inline{display:inline}
button{font:inherit;padding:.15em .7em;border:1px solid #9ca3af;border-radius:4px;background:#fff;
  cursor:pointer}
button.danger{border-color:#dc2626;color:#b91c1c}
button.link{border:0;background:none;text-decoration:underline;padding:0}
input[type=text],input[type=password],input[type=search],textarea{font:inherit;padding:.3em;
  border:1px solid #9ca3af;border-radius:4px}
textarea{width:100%;min-height:5em}
pre{white-space:pre-wrap;background:#fff;border:1px solid #e5e7eb;padding:.6em;border-radius:6px}
.msg{padding:.3em .6em;border-left:3px solid #e5e7eb;margin:.2em 0;background:#fff}
.msg.target{border-left-color:#f59e0b;background:#fffbeb}
.hit{margin:.8em 0}
svg.chart{background:#fff;border:1px solid #e5e7eb;border-radius:6px;max-width:100%;height:auto}
.ax{font:10px sans-serif;fill:#666}.lg{font:12px sans-serif;fill:#333}
details summary{cursor:pointer;color:#374151}
.stats span{margin-right:1.2em}
"""
FLASH = {
    "forget_fact": "The fact is forgotten (it stays in the history).",
    "remove_note": "The note is removed.",
    "cancel_reminder": "The reminder is cancelled.",
    "persona": "The persona is saved.",
    "compact": "Compaction ran.",
    "forget_person": "The person is forgotten: their messages and facts are gone.",
    "forget_chat": "The chat is forgotten.",
}


def chat_url(chat_key: str, *rest: str) -> str:
    """The dashboard's URL of a chat (and a sub-page)."""
    return "/".join([BASE, "chat", quote(chat_key, safe=""), *(quote(r, safe="") for r in rest)])


def csrf_field(csrf: str) -> Html:
    """The hidden CSRF input every form carries."""
    return html('<input type="hidden" name="csrf" value="{v}">', v=csrf)


def action_form(
    chat_key: str,
    csrf: str,
    action: str,
    label: str,
    fields: Mapping[str, object] | None = None,
    danger: bool = False,
    confirm: str | None = None,
    back: str = "",
) -> Html:
    """One labelled button posting `action` on the chat (`confirm`: a checkbox to tick first)."""
    hidden = [
        html('<input type="hidden" name="{k}" value="{v}">', k=k, v=v) for k, v in (fields or {}).items()
    ]
    if back:
        hidden.append(html('<input type="hidden" name="back" value="{v}">', v=back))
    check = (
        html(' <label><input type="checkbox" name="confirm" value="yes" required> {c}</label> ', c=confirm)
        if confirm
        else Html("")
    )
    return html(
        '<form class="inline" method="post" action="{url}">{csrf}<input type="hidden" name="action" '
        'value="{a}">'
        '{hidden}{check}<button type="submit"{cls}>{label}</button></form>',
        url=chat_url(chat_key, "do"),
        csrf=csrf_field(csrf),
        a=action,
        hidden=join(hidden),
        check=check,
        cls=trusted(' class="danger"') if danger else Html(""),
        label=label,
    )


def layout(title: str, body: Html, session: Session | None = None, csrf: str = "", flash: str = "") -> Html:
    """A whole page: the header (with Log out when logged in), a flash line, the body."""
    nav = Html("")
    if session is not None:
        nav = html(
            '<a href="{base}">Overview</a><span class="grow"></span><span class="muted">{who}</span>'
            '<form class="inline" method="post" action="{base}/logout">{csrf}'
            '<button class="link" type="submit">Log out</button></form>',
            base=BASE,
            who="owner" if session.role == "owner" else f"chat admin {session.who}",
            csrf=csrf_field(csrf),
        )
    note = html('<p class="flash" role="status">{m}</p>', m=FLASH[flash]) if flash in FLASH else Html("")
    return html(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="same-origin">'
        '<title>{title} · chatbot dashboard</title><link rel="stylesheet" href="{base}/style.css"></head>'
        "<body><header><strong>chatbot dashboard</strong>{nav}</header><main>{note}{body}</main></body>"
        "</html>",
        title=title,
        base=BASE,
        nav=nav,
        note=note,
        body=body,
    )


def login_page(error: str = "", link: str = "") -> Html:
    """The login form (the memory API token), or the button that uses a one-time link."""
    err = html('<p class="error" role="alert">{e}</p>', e=error) if error else Html("")
    if link:
        # A button, not a redirect: a link preview (Telegram fetches links) must not use it up.
        form = html(
            '<form method="post" action="{base}/login"><input type="hidden" name="link" value="{link}">'
            "<p>This one-time link opens the dashboard in this browser.</p>"
            '<button type="submit">Open the dashboard</button></form>',
            base=BASE,
            link=link,
        )
    else:
        form = html(
            '<form method="post" action="{base}/login"><p><label>Memory API token<br>'
            '<input type="password" name="token" autocomplete="current-password" size="40" required>'
            "</label></p>"
            '<button type="submit">Log in</button></form>'
            '<p class="muted">Or open a one-time link: <code>chatbot dashboard</code> prints one; '
            "a chat admin gets one from <code>/dashboard</code> in their chat.</p>",
            base=BASE,
        )
    return layout("Log in", html('<h1>Log in</h1>{err}<div class="card">{form}</div>', err=err, form=form))


def error_page(status: int, message: str, session: Session | None = None, csrf: str = "") -> Html:
    """A refusal or an error, said plainly."""
    return layout(
        f"Error {status}", html('<h1>{s}</h1><p class="error">{m}</p>', s=status, m=message), session, csrf
    )


def money(v: float) -> str:
    """A cost in USD."""
    return f"${v:,.4f}" if 0 < v < 0.01 else f"${v:,.2f}"


def when(ts: str) -> str:
    """A stored timestamp, shortened to the minute."""
    return ts[:16].replace("T", " ") if ts else "never"


def overview(
    directory: DirectoryAnswer, today: str, query: str, session: Session, csrf: str, flash: str = ""
) -> Html:
    """Every chat, newest activity first, filtered by `query`; the chart of calls and cost."""
    q = query.strip().lower()
    chats = [
        c
        for c in directory["chats"]
        if not q or q in c["title"].lower() or q in c["chat_key"].lower() or q in c["platform"]
    ]
    # A row per chat (a thousand here): one f-string of escaped values, not a `html` call each.
    rows = [
        Html(
            f'<tr><td><a href="{esc(chat_url(c["chat_key"]))}">{esc(c["title"] or c["chat_key"])}</a>'
            f'<div class="muted">{esc(c["chat_key"])}</div></td><td>{esc(c["platform"])}</td>'
            f'<td class="n">{c["messages"]:,}</td><td class="n">{c["people"]:,}</td>'
            f"<td>{esc(when(c['last_ts']))}</td>"
            f'<td class="n">{c["calls_month"]:,}</td><td class="n">{esc(money(c["cost_month"]))}</td></tr>'
        )
        for c in chats
    ]
    empty = html(
        '<tr><td colspan="7" class="muted">{m}</td></tr>', m="No chat matches." if q else "No chat yet."
    )
    return layout(
        "Overview",
        html(
            "<h1>Chats</h1>{chart}"
            '<form method="get" action="{base}" role="search"><p><label>Filter '
            '<input type="search" name="q" value="{q}" placeholder="title, key or platform"></label> '
            '<button type="submit">Filter</button> <span class="muted">{n} of {total} chats</span></p></form>'
            '<table><thead><tr><th>Chat</th><th>Platform</th><th class="n">Messages</th><th '
            'class="n">People</th>'
            '<th>Last activity</th><th class="n">Calls this month</th><th class="n">Cost this month</th>'
            "</tr></thead>"
            "<tbody>{rows}</tbody></table>",
            chart=usage_chart(directory["days"], today, title="Model calls per day, all chats"),
            base=BASE,
            q=query,
            n=len(chats),
            total=len(directory["chats"]),
            rows=join(rows) if rows else empty,
        ),
        session,
        csrf,
        flash,
    )


def message_line(m: Mapping[str, object], target: int = 0, chat_key: str = "") -> Html:
    """One message as a line: who, when, the words."""
    who = m.get("author") or ("the bot" if m.get("role") == "assistant" else m.get("author_id") or "someone")
    link = (
        html(' <a href="{u}">context</a>', u=chat_url(chat_key, "message", str(m["id"])))
        if chat_key
        else Html("")
    )
    return html(
        '<div class="msg{cls}" id="m{id}"><span class="muted">{when} · {who}</span>{link}<div>{text}</div>'
        "</div>",
        cls=" target" if target and m.get("id") == target else "",
        id=m.get("id"),
        when=when(str(m.get("ts") or "")),
        who=who,
        link=link,
        text=m.get("text"),
    )


def platform_link(chat_key: str, message_id: object) -> str | None:
    """The platform's own link to a message, where one can be made from the chat key alone.

    Telegram supergroups and channels (`telegram:-100<id>`): `https://t.me/c/<id>/<message>`
    (it opens for members). Discord's needs the server's id, which the chat key does not hold.
    """
    parts = chat_key.split(":")
    mid = str(message_id or "")
    if parts[0] == "telegram" and len(parts) >= 2 and parts[1].startswith("-100") and mid.isdigit():
        return f"https://t.me/c/{parts[1][4:]}/{mid}"
    return None


def message_page(chat_key: str, title: str, around: AroundAnswer, session: Session, csrf: str) -> Html:
    """A message shown with the messages around it (where a fact came from)."""
    if not around["target"]:
        body = html('<p class="error">That message is no longer in memory.</p>')
    else:
        body = join(message_line(m, around["target"]) for m in around["messages"])
        target = next(m for m in around["messages"] if m["id"] == around["target"])
        link = platform_link(chat_key, target.get("message_id"))
        if link:
            body = html(
                '{b}<p><a href="{u}" rel="noopener noreferrer">Open it on {p}</a></p>',
                b=body,
                u=link,
                p=chat_key.split(":")[0].title(),
            )
    return layout(
        "Message",
        html(
            '<p><a href="{url}">← {title}</a></p><h1>A message in its context</h1>{body}',
            url=chat_url(chat_key),
            title=title or chat_key,
            body=body,
        ),
        session,
        csrf,
    )


def hits(chat_key: str, query: str, results: Iterable[tuple[Mapping[str, object], AroundAnswer]]) -> Html:
    """Search hits, each with the messages around it."""
    found = [
        html(
            '<div class="hit card"><div class="muted">score {score}</div>{lines}</div>',
            score=f"{float(str(hit.get('score') or 0)):.2f}",
            lines=join(message_line(m, int(str(hit["id"])), chat_key) for m in around["messages"]),
        )
        for hit, around in results
    ]
    return html(
        "<h2>Search: “{q}”</h2>{found}",
        q=query,
        found=join(found) if found else html('<p class="muted">Nothing found.</p>'),
    )
