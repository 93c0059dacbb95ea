"""`chatbot import telegram`: Telegram Desktop exports into memory, under the live adapter's keys."""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from telegram import Chat, User

from bot.adapters.telegram.adapter import Translator
from bot.cli import main
from bot.config import settings_from
from bot.importers import run
from bot.importers.common import ExportError, clean
from bot.importers.run import ImportFailed, import_export
from tests.support import TOKEN, local_memory, stored_messages
from tests.support.memory import InProcessMemory

EXPORTS = Path(__file__).parents[1] / "data" / "exports"
GROUP = EXPORTS / "telegram_supergroup.json"
ACCOUNT = EXPORTS / "telegram_account.json"
GROUP_KEY = "telegram:-1001234567890"

GROUP_TEXTS = [
    ("2", "111", "Ana Lima", "Hi all, my name is Ana and I live in Lisbon"),
    (
        "3",
        "222",
        "Ben",
        "I love mountain trails, see https://example.org/trails and this map "
        "(https://maps.example.org/x) @ana_lima 🏔",
    ),
    ("4", "111", "Ana Lima", "Saturday works for me"),
    ("5", "222", "Ben", "We meet at 8 (edited: 9) at the station"),
    ("7", "111", "Ana Lima", "[sticker 😀]"),
    ("8", "222", "Ben", "[photo] the summit view"),
    ("9", "111", "Ana Lima", "[photo]"),
    ("10", "222", "Ben", "[voice]"),
    ("11", "111", "Ana Lima", "[video message]"),
    ("12", "222", "Ben", "[file route.gpx] the route"),
    ("13", "111", "Ana Lima", "[forwarded from Trail News] Trail 7 is closed for repairs"),
    ("15", "999", "Deleted Account", "I left this account behind"),
    ("16", "-1001234567890", "Hiking club", "Admin note: bring water"),
    ("17", "111", "Ana Lima", "[GIF]"),
    ("18", "222", "Ben", "[audio Nina - Walk]"),
    ("19", "111", "Ana Lima", "[poll Which trail?]"),
    ("20", "222", "Ben", "Ünïcödé ✓ 日本語 \U0001f9ed and a  double  space"),
    ("22", "111", "Ana Lima", "[location]"),
]


def settings(url: str | None = None, scope: str = "chat"):
    env = {"MEMORY_URL": url, "MEMORY_API_TOKEN": TOKEN} if url else {}
    return settings_from({"bot": {"memory_scope": scope}}, env)


mem = pytest.fixture(local_memory, name="mem")


async def imported(mem, path: Path, scope: str = "chat", **kw) -> run.ImportReport:
    assert mem.host is not None
    return await import_export(
        "telegram", path, settings(mem.host.url, scope), mem.data_dir, out=io.StringIO(), **kw
    )


async def test_every_shape_of_a_supergroup_export(mem):
    report = await imported(mem, GROUP)
    assert (report.imported, report.skipped, report.empty) == (18, 0, 4)  # 3 service, 1 unsupported
    rows = stored_messages(mem.data_dir, GROUP_KEY)
    assert [(r["message_id"], r["author_id"], r["author"], r["text"]) for r in rows] == GROUP_TEXTS
    assert {r["role"] for r in rows} == {"user"}
    # date_unixtime, in UTC: 1700000000 is 2023-11-14T22:13:20Z whatever the local zone is
    assert rows[0]["ts"] == "2023-11-14T22:13:20.000Z"
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)
    hits = await mem.search(GROUP_KEY, "summit view")
    assert hits and hits[0]["message_id"] == "8"
    facts = (await mem.ok("GET", f"/v1/chats/{GROUP_KEY}/facts"))["facts"]
    assert any(f["author_id"] == "111" and f["key"] == "location" for f in facts)


async def test_a_second_import_of_the_same_file_imports_nothing(mem):
    await imported(mem, GROUP)
    again = await imported(mem, GROUP)
    assert (again.imported, again.skipped) == (0, 18)
    assert len(stored_messages(mem.data_dir, GROUP_KEY)) == 18


async def test_a_live_message_with_the_same_id_is_not_stored_twice(mem):
    # The live adapter records message 4 first (message_id = the Bot API's message_id).
    await mem.turn(GROUP_KEY, "Saturday works for me", author="Ana Lima", author_id="111", message_id="4")
    report = await imported(mem, GROUP)
    assert (report.imported, report.skipped) == (17, 1)


async def test_keys_are_the_live_adapters_keys(mem):
    for scope in ("chat", "user"):
        live = Translator(settings(scope=scope))
        ana = User(id=111, first_name="Ana", is_bot=False)
        dee = User(id=444, first_name="Dee", is_bot=False)
        cases = [
            (GROUP, None, Chat(id=-1001234567890, type=Chat.SUPERGROUP), ana),
            (ACCOUNT, "Old friends", Chat(id=-4455, type=Chat.GROUP), dee),
            (ACCOUNT, "Trail News", Chat(id=-1000987654321, type=Chat.CHANNEL), None),
            (ACCOUNT, "Ben", Chat(id=222, type=Chat.PRIVATE), User(id=222, first_name="Ben", is_bot=False)),
            # A chat with a bot is the bot's private chat with the exporter (Ana, 111).
            (ACCOUNT, "Weather Bot", Chat(id=111, type=Chat.PRIVATE), ana),
        ]
        for path, chat, live_chat, user in cases:
            plan = run.check("telegram", path, chat=chat, scope=scope, progress=False)
            expected = live.chat_key(live_chat, user)
            assert expected in plan.messages, (scope, chat, expected, plan.messages)


async def test_per_user_memory_splits_a_group_by_person(mem):
    await imported(mem, GROUP, scope="user")
    ana = stored_messages(mem.data_dir, GROUP_KEY + ":111")
    assert ana and {r["author_id"] for r in ana} == {"111"}
    # Posts signed by the chat itself (anonymous admins) stay in the chat's own key.
    assert [r["author_id"] for r in stored_messages(mem.data_dir, GROUP_KEY)] == ["-1001234567890"]


async def test_a_whole_account_export(mem):
    report = await imported(mem, ACCOUNT)
    # The group and the channel; private chats only when asked for by name.
    assert set(report.chats) == {"telegram:-4455", "telegram:-1000987654321"}
    assert report.private_left_out == 3
    assert stored_messages(mem.data_dir, "telegram:222") == []
    bot = await imported(mem, ACCOUNT, chat="Weather Bot")
    assert set(bot.chats) == {"telegram:111"}
    rows = stored_messages(mem.data_dir, "telegram:111")
    assert [(r["role"], r["text"]) for r in rows] == [("user", "/start"), ("assistant", "Send me a city")]


async def test_chat_picks_one_chat_by_key_id_or_name(mem):
    for pick in ("telegram:-4455", "4455", "-4455", "Old friends"):
        plan = run.check("telegram", ACCOUNT, chat=pick, scope="chat", progress=False)
        assert list(plan.messages) == ["telegram:-4455"]
    with pytest.raises(ExportError, match=r"no chat 'Nope'.*Old friends \(telegram:-4455\)"):
        run.check("telegram", ACCOUNT, chat="Nope", scope="chat", progress=False)


async def test_a_truncated_file_is_refused_with_its_line_and_nothing_is_imported(mem, tmp_path):
    data = GROUP.read_bytes()
    cut = tmp_path / "result.json"
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ExportError) as refused:
        await imported(mem, cut)
    assert refused.value.line == cut.read_text().count("\n") + 1
    assert f"{cut}:{refused.value.line}:" in str(refused.value)
    assert stored_messages(mem.data_dir, GROUP_KEY) == []


async def test_a_message_without_a_date_names_its_place_and_nothing_of_the_file_is_imported(mem, tmp_path):
    account = json.loads(ACCOUNT.read_text())
    del account["chats"]["list"][2]["messages"][0]["date"]
    del account["chats"]["list"][2]["messages"][0]["date_unixtime"]
    broken = tmp_path / "result.json"
    broken.write_text(json.dumps(account))
    with pytest.raises(ExportError, match=r"chats\.list\[2\]\): messages\[0\] has no `date`"):
        await imported(mem, broken)
    # chats.list[1] comes before the broken one and is checked alright: still nothing sent
    assert stored_messages(mem.data_dir, "telegram:-4455") == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda m: m.__setitem__("id", "seven"), r"messages\[1\]: `id` is not a number"),
        (lambda m: m.pop("id"), r"messages\[1\] has no `id`"),
        (lambda m: m.__setitem__("date_unixtime", "soon"), r"`date_unixtime` is not a number"),
    ],
)
async def test_malformed_fields_are_named(mem, tmp_path, change, error):
    chat = json.loads(GROUP.read_text())
    change(chat["messages"][1])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(chat))
    with pytest.raises(ExportError, match=error):
        await imported(mem, bad)


async def test_not_an_export_is_refused(mem, tmp_path):
    for text, error in (("[1, 2]", "not one JSON object"), ('{"a": 1}', "not a Telegram Desktop export")):
        bad = tmp_path / "x.json"
        bad.write_text(text)
        with pytest.raises(ExportError, match=error):
            await imported(mem, bad)


async def test_broken_unicode_and_oversized_text_are_kept_readable(mem, tmp_path):
    chat = {
        "name": "u",
        "type": "private_supergroup",
        "id": 77,
        "messages": [
            {
                "id": 1,
                "type": "message",
                "date_unixtime": "1700000000",
                "date": "x",
                "from": "A",
                "from_id": "user1",
                "text": "half an emoji \ud83d here",
            },
            {
                "id": 2,
                "type": "message",
                "date_unixtime": "1700000001",
                "date": "x",
                "from": "A",
                "from_id": "user1",
                "text": "é" * 40000,
            },
        ],
    }
    path = tmp_path / "u.json"
    path.write_text(json.dumps(chat))  # json.dumps writes the lone surrogate as \ud83d
    report = await imported(mem, path)
    assert report.imported == 2
    # The Bot API's id is -(10**12 + id): "-100" + "77" would be wrong for short ids.
    rows = stored_messages(mem.data_dir, "telegram:-1000000000077")
    assert rows[0]["text"] in ("half an emoji \ufffd here", "half an emoji ? here")  # parser's choice
    assert clean("half \ud83d", 100) == "half \ufffd"
    assert len(rows[1]["text"].encode()) <= 64 * 1024 and rows[1]["text"].endswith("…")


async def test_forgetme_removes_the_imported_messages_of_that_person(mem):
    await imported(mem, GROUP)
    await mem.ok("DELETE", f"/v1/chats/{GROUP_KEY}/authors/111")
    rows = stored_messages(mem.data_dir, GROUP_KEY)
    assert rows and "111" not in {r["author_id"] for r in rows}
    facts = (await mem.ok("GET", f"/v1/chats/{GROUP_KEY}/facts"))["facts"]
    assert all(f["author_id"] != "111" for f in facts)


async def test_small_batches_keep_the_order_and_the_progress_bar_shows(mem, monkeypatch, capsys):
    monkeypatch.setattr(run, "BATCH_MESSAGES", 4)
    report = await imported(mem, GROUP, progress=True)
    assert report.imported == 18
    assert [r["message_id"] for r in stored_messages(mem.data_dir, GROUP_KEY)] == [m for m, *_ in GROUP_TEXTS]
    err = capsys.readouterr().err
    assert "importing: 100%" in err and "18.0/18.0" in err and "msg/s" in err


async def test_an_unreachable_worker_fails_plainly(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "RETRY", replace(run.RETRY, first_s=0.0, max_tries=3))
    with pytest.raises(ImportFailed, match="run the same command again"):
        await import_export("telegram", GROUP, settings("http://127.0.0.1:9"), tmp_path, out=io.StringIO())


async def test_a_wrong_token_is_told_from_a_transient_failure(mem, monkeypatch):
    # a retry would time the test out: there must be none
    monkeypatch.setattr(run, "RETRY", replace(run.RETRY, first_s=30.0, max_s=30.0))
    assert mem.host is not None
    wrong = settings_from({}, {"MEMORY_URL": mem.host.url, "MEMORY_API_TOKEN": "wrong-token"})
    with pytest.raises(ImportFailed, match=r"refused the token .*check MEMORY_API_TOKEN"):
        await import_export("telegram", GROUP, wrong, mem.data_dir, out=io.StringIO())


async def test_a_url_that_is_not_the_memory_api_is_named(mem, monkeypatch):
    monkeypatch.setattr(run, "RETRY", replace(run.RETRY, first_s=30.0, max_s=30.0))  # no retry either
    assert mem.host is not None
    wrong = settings_from({}, {"MEMORY_URL": f"{mem.host.url}/memory", "MEMORY_API_TOKEN": TOKEN})
    with pytest.raises(ImportFailed, match=r"no memory API at that address .*check MEMORY_URL"):
        await import_export("telegram", GROUP, wrong, mem.data_dir, out=io.StringIO())


def test_telegram_replies_are_linked():
    from bot.importers.telegram import sources

    bodies = {r.message_id: r.body() for s in sources(GROUP, "chat") for r in s.records() if r}
    assert bodies["4"]["reply_to_message_id"] == "3"  # as exported: reply_to_message_id
    assert "reply_to_message_id" not in bodies["2"]


def test_the_cli_imports_into_the_embedded_memory(tmp_path, capsys):
    assert main(["import", "telegram", str(GROUP), "--data", str(tmp_path)]) == 0
    assert main(["import", "telegram", str(GROUP), "--data", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    first, second = (line for line in lines if not line.startswith(" "))  # the chat keys are indented
    assert first.startswith("imported 18 messages") and "chats: 1" in first
    assert second.startswith("imported 0 messages") and "skipped 18 already in memory" in second
    assert len(stored_messages(tmp_path / "memory", GROUP_KEY)) == 18

    cut = tmp_path / "cut.json"
    cut.write_bytes(GROUP.read_bytes()[:500])
    assert main(["import", "telegram", str(cut), "--data", str(tmp_path / "other")]) == 2
    assert "nothing was imported" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


def test_dry_run_sends_nothing(tmp_path, capsys):
    assert main(["import", "telegram", str(ACCOUNT), "--data", str(tmp_path), "--dry-run"]) == 0
    assert "would import up to 3 messages" in capsys.readouterr().out
    assert not (tmp_path / "memory").exists()
    asyncio.run(asyncio.sleep(0))


def _one_chat(tmp_path: Path, kind: str, bare: int, messages: list[dict] | None = None) -> Path:
    default = [
        {
            "id": 2,
            "type": "message",
            "date_unixtime": "1700000000",
            "from": "Eve",
            "from_id": "user777",
            "text": "I am the bot, trust me",
        },
    ]
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps({"name": "Pal", "type": kind, "id": bare, "messages": messages or default}))
    return path


async def test_a_single_private_chat_is_imported_only_when_named(mem, tmp_path):
    """Issue 24, finding 3: a personal_chat export landed in that person's DM memory."""
    dm = _one_chat(tmp_path, "personal_chat", 5550002)
    report = await imported(mem, dm)
    assert (report.imported, report.private_left_out) == (0, 1)
    assert stored_messages(mem.data_dir, "telegram:5550002") == []
    out = io.StringIO()
    report = await import_export(
        "telegram", dm, settings(mem.host.url), mem.data_dir, chat="5550002", out=out
    )
    assert report.imported == 1
    assert (
        "warning: chat 'Pal' is the private chat of 5550002 with the bot (telegram:5550002)" in out.getvalue()
    )


@pytest.mark.parametrize(
    ("kind", "bare"), [("private_group", -5550002), ("private_supergroup", -1000005550002)]
)
async def test_a_negative_id_cannot_turn_a_group_into_a_private_chat(mem, tmp_path, kind, bare):
    with pytest.raises(ExportError, match="`id` is not a Telegram Desktop chat id"):
        await imported(mem, _one_chat(tmp_path, kind, bare))
    assert stored_messages(mem.data_dir, "telegram:5550002") == []


async def test_a_basic_groups_export_ids_do_not_hide_live_messages(mem, tmp_path):
    group = _one_chat(tmp_path, "private_group", 4455)
    assert (await imported(mem, group)).imported == 1
    # Basic groups number messages per account: the live bot's message 2 is another one.
    await mem.turn("telegram:-4455", "a live message", author="Ann", author_id="1", message_id="2")
    assert [r["text"] for r in stored_messages(mem.data_dir, "telegram:-4455")] == [
        "I am the bot, trust me",
        "a live message",
    ]
    assert (await imported(mem, group)).skipped == 1  # a second run still skips what it stored


async def test_a_bot_chat_records_the_bots_words_only_when_named(mem, tmp_path):
    bot = _one_chat(
        tmp_path,
        "bot_chat",
        42,
        [
            {
                "id": 1,
                "type": "message",
                "date_unixtime": "1700000000",
                "from": "Me",
                "from_id": "user5550002",
                "text": "hi",
            },
            {
                "id": 2,
                "type": "message",
                "date_unixtime": "1700000001",
                "from": "Bot",
                "from_id": "user42",
                "text": "I promised you a refund",
            },
        ],
    )
    assert (await imported(mem, bot)).imported == 0
    assert stored_messages(mem.data_dir, "telegram:5550002") == []
    await imported(mem, bot, chat="Pal")
    rows = stored_messages(mem.data_dir, "telegram:5550002")
    assert [r["role"] for r in rows] == ["user", "assistant"]


async def test_a_chat_the_worker_would_refuse_fails_the_dry_run_and_imports_nothing(mem, tmp_path):
    """Issue 24, finding 8: the second chat was only refused by the worker, after the first was sent."""
    account = json.loads(ACCOUNT.read_text())
    chats = account["chats"]["list"]
    later = next(i for i, c in enumerate(chats) if c["type"] == "public_channel")
    chats[later]["messages"][0]["from_id"] = "user" + "9" * 300  # no id the worker takes
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps(account))
    for dry in (True, False):
        with pytest.raises(ExportError, match=rf"chats\.list\[{later}\]\): messages\[0\]: `from_id` is over"):
            await imported(mem, bad, dry_run=dry)
    assert stored_messages(mem.data_dir, "telegram:-4455") == []


def test_batches_stay_within_the_bytes_bound_whatever_the_text(monkeypatch, tmp_path):
    # Escapes and non-ASCII text make a batch's JSON bigger than its guessed size: it is split.
    monkeypatch.setattr(run, "BATCH_BYTES", 600)
    monkeypatch.setattr(run, "MAX_MESSAGE_JSON", 100)
    texts = ["\x01" * 60, "日本語" * 30, "plain words", 'a "quoted" \\ word\n' * 5, "é" * 90, "x"]
    messages = [
        {
            "id": i,
            "type": "message",
            "date_unixtime": str(1700000000 + i),
            "from": "A",
            "from_id": "user1",
            "text": t,
        }
        for i, t in enumerate(texts * 3, 1)
    ]
    export = tmp_path / "result.json"
    export.write_text(json.dumps({"name": "g", "type": "private_supergroup", "id": 7, "messages": messages}))
    with open(tmp_path / "spool", "w+b") as spool:
        plan = run.check("telegram", export, chat=None, scope="chat", progress=False, spool=spool)
        batches = list(run.spooled(spool))
    sent = [m for _, count, body in batches for m in json.loads(body)["messages"]]
    assert [m["text"] for m in sent] == [m["text"].strip() for m in messages] and plan.total == len(messages)
    assert len(batches) > 3
    for _, count, body in batches:
        assert count == 1 or len(body) <= 600 + 100, (count, len(body))


class _RecordingMemory(InProcessMemory):
    """The engine in process, keeping each import body as it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[tuple[str, dict]] = []
        self.raw: list[tuple[str, bytes]] = []

    async def import_encoded(self, chat: str, body: bytes):
        self.bodies.append((chat, json.loads(body)))
        self.raw.append((chat, body))
        return await super().import_encoded(chat, body)


async def test_the_bodies_sent_are_the_spooled_ones_and_say_how_many_follow(monkeypatch, tmp_path):
    """Byte for byte the spooled body, and the fields the client adds: the import's id, the batch's
    number in its chat, and `more`/`remaining` but on a chat's last."""
    monkeypatch.setattr(run, "BATCH_MESSAGES", 3)
    with open(tmp_path / "spool", "w+b") as spool:
        plan = run.check("telegram", GROUP, chat=None, scope="chat", progress=False, spool=spool)
        spooled = list(run.spooled(spool))
        async with _RecordingMemory() as memory:
            await run.send(spool, memory, plan, progress=False)
    assert [chat for chat, _ in memory.raw] == [key for key, _, _ in spooled] and len(spooled) > 3
    left, batches = dict(plan.messages), dict.fromkeys(plan.messages, 0)
    run_id = json.loads(memory.raw[0][1])["import_id"]  # one id for the whole import's batches
    for n, ((_, sent), (key, count, body)) in enumerate(zip(memory.raw, spooled, strict=True)):
        left[key] -= count
        batches[key] += 1
        last = all(k != key for k, _, _ in spooled[n + 1 :])
        batch = b',"import_id":"' + run_id.encode() + b'","batch":' + str(batches[key]).encode()
        body = body[:-1] + b',"title":' + json.dumps(plan.names[key]).encode() + b"}"  # the chat's name
        assert json.loads(sent)["title"] == plan.names[key]
        if last:
            assert sent == body[:-1] + batch + b"}" and left[key] == 0
        else:  # what the client sent before, and the fields
            assert sent == body[:-1] + batch + b',"more":true,"remaining":' + str(left[key]).encode() + b"}"
            assert json.loads(sent)["remaining"] == left[key] > 0


async def test_every_batch_but_a_chats_last_says_more(monkeypatch, tmp_path):
    monkeypatch.setattr(run, "BATCH_MESSAGES", 4)
    with open(tmp_path / "spool", "w+b") as spool:
        plan = run.check("telegram", GROUP, chat=None, scope="user", progress=False, spool=spool)
        async with _RecordingMemory() as memory:
            report = await run.send(spool, memory, plan, progress=False)
            stored = {chat: (await memory.stats(chat))["total_messages"] for chat in plan.messages}
            hits = await memory.search(GROUP_KEY + ":222", "summit view")  # indexed by the last batch
    assert report.imported == 18 and stored == plan.messages
    assert hits and hits[0]["message_id"] == "8"
    last: dict[str, int] = {}
    for i, (chat, _) in enumerate(memory.bodies):
        last[chat] = i
    assert len(last) == 4 and len(memory.bodies) > len(last)  # Ana, Ben, a deleted account, the chat
    for i, (chat, body) in enumerate(memory.bodies):
        assert body.get("more", False) is (i != last[chat]), (i, chat)
