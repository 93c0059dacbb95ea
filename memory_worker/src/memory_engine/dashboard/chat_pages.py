"""The chat page and the person page: what the memory holds of one chat, and of one person in it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memory_engine.api import wire
from memory_engine.dashboard.auth import Session
from memory_engine.dashboard.charts import usage_chart
from memory_engine.dashboard.markup import Html, html, join
from memory_engine.dashboard.pages import action_form, chat_url, layout, money, when
from memory_engine.dashboard.wire import Person, UsageDay
from memory_engine.reminders.wire import Reminder


@dataclass
class ChatData:
    """What the chat page shows, as the memory API answered it."""

    chat_key: str
    title: str
    today: str
    stats: wire.StatsAnswer
    summary: wire.SummaryAnswer
    people: list[Person]
    sources: Mapping[str, int]
    facts: list[wire.Fact]  # current and superseded (history=1)
    notes: list[wire.Fact]
    reminders: list[Reminder]
    settings: wire.SettingsAnswer
    usage: wire.UsageAnswer
    days: list[UsageDay]
    search: Html = field(default_factory=lambda: Html(""))
    query: str = ""


def _due(ms: object) -> str:
    try:
        return datetime.fromtimestamp(int(str(ms)) / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError):
        return "?"


def _facts_of(data: ChatData, author_id: str, csrf: str, back: str) -> Html:
    """One person's current facts (each with its source and a Forget button) and their history."""
    mine = [f for f in data.facts if f["author_id"] == author_id and f.get("kind", "fact") == "fact"]
    current = [f for f in mine if not f.get("superseded_at")]
    old = [f for f in mine if f.get("superseded_at")]
    rows = []
    for f in current:
        source = data.sources.get(str(f["id"]))
        link = (
            html('<a href="{u}">from this message</a>', u=chat_url(data.chat_key, "message", str(source)))
            if source
            else html('<span class="muted">no source</span>')
        )
        rows.append(
            html(
                "<tr><td>{key}</td><td>{value}</td><td>{when}</td><td>{link}</td><td>{forget}</td></tr>",
                key=f["key"],
                value=f["value"],
                when=when(f["updated_at"]),
                link=link,
                forget=action_form(
                    data.chat_key, csrf, "forget_fact", "Forget", {"fact_id": f["id"]}, back=back
                ),
            )
        )
    table = (
        html(
            "<table><thead><tr><th>Fact</th><th>Value</th><th>Since</th><th>Source</th><th></th></tr>"
            "</thead><tbody>{r}</tbody></table>",
            r=join(rows),
        )
        if rows
        else html('<p class="muted">No facts.</p>')
    )
    if old:
        items = join(
            html(
                '<li>{k}: {v} <span class="muted">({a} – {b})</span></li>',
                k=f["key"],
                v=f["value"],
                a=when(f["updated_at"]),
                b=when(str(f["superseded_at"])),
            )
            for f in old
        )
        table = html(
            "{t}<details><summary>History ({n})</summary><ul>{i}</ul></details>", t=table, n=len(old), i=items
        )
    return table


def _is_followup(r: Reminder) -> bool:
    """A follow-up is kept as a reminder whose `every` names the plan."""
    every = r.get("every")
    return isinstance(every, dict) and "followup" in every


def _plan(r: Reminder) -> str:
    every = r.get("every") or {}
    return str(every.get("followup", ""))


def _repeats(every: object) -> str:
    if not every:
        return "once"
    if isinstance(every, dict):
        return ", ".join(f"{k} {v}" for k, v in every.items())
    return str(every)


def _reminders(
    data: ChatData, csrf: str, back: str, author_id: str | None = None, followups: bool = False
) -> Html:
    rows = [
        html(
            "<tr><td>{text}</td><td>{who}</td><td>{due}</td><td>{every}</td><td>{cancel}</td></tr>",
            text=f"how did “{_plan(r)}” go?" if followups else r.get("text"),
            who=r.get("author") or r.get("author_id"),
            due=_due(r.get("due_at")),
            every="the day after" if followups else _repeats(r.get("every")),
            cancel=action_form(
                data.chat_key,
                csrf,
                "cancel_reminder",
                "Cancel",
                {"reminder_id": r["id"]},
                danger=True,
                confirm="sure",
                back=back,
            ),
        )
        for r in data.reminders
        if (author_id is None or r.get("author_id") == author_id) and _is_followup(r) == followups
    ]
    if not rows:
        return html(
            '<p class="muted">{m}</p>', m="No follow-up planned." if followups else "No pending reminder."
        )
    return html(
        "<table><thead><tr><th>Reminder</th><th>For</th><th>Due</th><th>Repeats</th><th></th></tr></thead>"
        "<tbody>{r}</tbody></table>",
        r=join(rows),
    )


def _notes(data: ChatData, csrf: str, back: str, author_id: str | None = None) -> Html:
    rows = [
        html(
            '<li>{text} <span class="muted">by {who}, {when}</span> {remove}</li>',
            text=n["value"],
            who=n.get("author") or n.get("author_id"),
            when=when(n["updated_at"]),
            remove=action_form(data.chat_key, csrf, "remove_note", "Remove", {"fact_id": n["id"]}, back=back),
        )
        for n in data.notes
        if author_id is None or n.get("author_id") == author_id
    ]
    return html("<ul>{r}</ul>", r=join(rows)) if rows else html('<p class="muted">No notes.</p>')


def _usage_table(usage: wire.UsageAnswer) -> Html:
    tiers: Mapping[str, wire.TierUsage] = usage.get("tiers") or {}
    rows = [
        html(
            '<tr><td>{t}</td><td class="n">{c}</td><td class="n">{e}</td><td class="n">{p}</td><td '
            'class="n">{o}</td><td class="n">{cost}</td></tr>',
            t=tier,
            c=u.get("calls", 0),
            e=u.get("errors", 0),
            p=u.get("prompt_tokens", 0),
            o=u.get("completion_tokens", 0),
            cost=money(float(u.get("cost_usd") or 0)),
        )
        for tier, u in sorted(tiers.items())
    ]
    if not rows:
        return html('<p class="muted">No model calls recorded.</p>')
    return html(
        '<table><thead><tr><th>Tier</th><th class="n">Calls</th><th class="n">Errors</th><th '
        'class="n">Prompt tokens</th>'
        '<th class="n">Completion tokens</th><th class="n">Cost</th></tr></thead><tbody>{r}</tbody></table>',
        r=join(rows),
    )


def chat_page(data: ChatData, session: Session, csrf: str, flash: str = "") -> Html:
    """Everything the memory holds of one chat, with the owner's actions."""
    back = chat_url(data.chat_key)
    people = []
    for p in data.people:
        aliases = (
            html(' <span class="muted">also known as {a}</span>', a=", ".join(p["aliases"]))
            if p["aliases"]
            else Html("")
        )
        people.append(
            html(
                '<div class="card person"><h3><a href="{url}">{name}</a>{aliases}</h3>'
                '<p class="muted">{n} messages · last seen {last} · id {id}</p>{facts}</div>',
                url=chat_url(data.chat_key, "person", p["author_id"]),
                name=p["author"],
                aliases=aliases,
                n=p["messages"],
                last=when(p["last_seen"]),
                id=p["author_id"],
                facts=_facts_of(data, p["author_id"], csrf, back),
            )
        )
    followups = [
        f for f in data.facts if f["key"] == "followups" and not f.get("superseded_at") and f["value"] == "on"
    ]
    follow = html(
        '{planned}<p class="muted">Asked for follow-ups: {who}</p>',
        planned=_reminders(data, csrf, back, followups=True),
        who=", ".join(f["author"] or f["author_id"] for f in followups) or "nobody",
    )
    s = data.stats
    title = data.title or data.chat_key
    summary = data.summary.get("summary") or ""
    body = html(
        "<h1>{title}</h1>"
        '<p class="stats muted"><span>{key}</span><span>{total} messages ({active} recent, {archived} '
        "summarized)</span>"
        "<span>{facts} facts</span><span>mode {mode}</span></p>"
        '<form method="get" action="{url}" role="search"><p><label>Search this chat\'s memory '
        '<input type="search" name="q" value="{q}" size="40"></label> <button type="submit">Search</button>'
        "</p></form>"
        "{search}"
        "<h2>Summary</h2>{summary}"
        "<h2>People</h2>{people}"
        "<h2>Notes</h2>{notes}"
        "<h2>Pending reminders</h2>{reminders}"
        "<h2>Follow-ups</h2>{follow}"
        "<h2>Persona</h2>{persona}"
        "<h2>Usage</h2>{chart}{usage}"
        "<h2>Actions</h2><p>{compact} {export}</p>"
        '<div class="card"><p><strong>Forget this chat</strong>: everything it remembers is '
        "deleted.</p>{forget}</div>",
        title=title,
        key=data.chat_key,
        total=s.get("total_messages", 0),
        active=s.get("active_messages", 0),
        archived=s.get("archived_messages", 0),
        facts=s.get("facts", 0),
        mode=s.get("mode", "auto"),
        url=back,
        q=data.query,
        search=data.search,
        summary=html("<pre>{s}</pre>", s=summary)
        if summary
        else html('<p class="muted">No summary yet.</p>'),
        people=join(people) if people else html('<p class="muted">Nobody yet.</p>'),
        notes=_notes(data, csrf, back),
        reminders=_reminders(data, csrf, back),
        follow=follow,
        persona=_persona_form(data, csrf),
        chart=usage_chart(data.days, data.today, title="Model calls per day"),
        usage=_usage_table(data.usage),
        compact=action_form(data.chat_key, csrf, "compact", "Compact now"),
        export=html('<a href="{u}">Export the chat (JSON)</a>', u=chat_url(data.chat_key, "export")),
        forget=_forget_chat_form(data, csrf),
    )
    return layout(title, body, session, csrf, flash)


def _persona_form(data: ChatData, csrf: str) -> Html:
    return html(
        '<form method="post" action="{url}"><input type="hidden" name="csrf" value="{csrf}">'
        '<input type="hidden" name="action" value="persona"><label for="persona" class="muted">'
        "The chat's own instructions for the model (empty: the bot's default).</label>"
        '<textarea id="persona" name="persona" maxlength="2000">{p}</textarea><p><button type="submit">Save '
        "persona</button></p></form>",
        url=chat_url(data.chat_key, "do"),
        csrf=csrf,
        p=data.settings.get("persona") or "",
    )


def _forget_chat_form(data: ChatData, csrf: str) -> Html:
    title = data.title or data.chat_key
    return html(
        '<form method="post" action="{url}"><input type="hidden" name="csrf" value="{csrf}">'
        '<input type="hidden" name="action" value="forget_chat"><p><label>Type the chat\'s title, '
        "<strong>{t}</strong>, "
        'to confirm: <input type="text" name="confirm_title" required autocomplete="off"></label> '
        '<button type="submit" class="danger">Forget the chat</button></p></form>',
        url=chat_url(data.chat_key, "do"),
        csrf=csrf,
        t=title,
    )


def person_page(data: ChatData, person: Person, session: Session, csrf: str, flash: str = "") -> Html:
    """One person of a chat: their facts with history, notes, reminders; export, forget."""
    back = chat_url(data.chat_key, "person", person["author_id"])
    aliases = ", ".join(person["aliases"]) or "none"
    body = html(
        '<p><a href="{chat}">← {title}</a></p><h1>{name}</h1>'
        '<p class="stats muted"><span>id {id}</span><span>{n} messages</span><span>last seen {last}</span>'
        "<span>other names: {aliases}</span></p>"
        "<h2>Facts</h2>{facts}<h2>Notes</h2>{notes}<h2>Pending reminders</h2>{reminders}"
        '<h2>Their data</h2><p><a href="{export}">Export their data (JSON)</a></p>'
        '<div class="card"><p><strong>Forget this person</strong>: their messages, the replies to them and '
        "their facts "
        "are deleted.</p>{forget}</div>",
        chat=chat_url(data.chat_key),
        title=data.title or data.chat_key,
        name=person["author"],
        id=person["author_id"],
        n=person["messages"],
        last=when(person["last_seen"]),
        aliases=aliases,
        facts=_facts_of(data, person["author_id"], csrf, back),
        notes=_notes(data, csrf, back, person["author_id"]),
        reminders=_reminders(data, csrf, back, person["author_id"]),
        export=chat_url(data.chat_key, "person", person["author_id"], "export"),
        forget=action_form(
            data.chat_key,
            csrf,
            "forget_person",
            "Forget this person",
            {"author_id": person["author_id"]},
            danger=True,
            confirm="I am sure",
            back=chat_url(data.chat_key),
        ),
    )
    return layout(person["author"], body, session, csrf, flash)


def find_person(people: Sequence[Person], author_id: str) -> Person | None:
    """The person with `author_id`, if the chat knows them."""
    return next((p for p in people if p["author_id"] == author_id), None)
