"""/export, /remember, /unremember, /forgetfact, /new through the pipeline against the real local
memory host, and the console (a real `chatbot chat` subprocess) writing DIR/export-<chat>.json."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from bot.chat.commands import own_data
from bot.chat.pipeline import MEMORY_DOWN
from bot.chat.types import CommandResult
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import console_chat, make_settings, msg, numbered, prompt_section, running_pipeline

CHAT = "test:chat"
ADA = {"author": "ada", "author_id": "u1"}
BOB = {"author": "bob", "author_id": "u2", "admin": False}


def exported(result: CommandResult) -> dict[str, Any]:
    """The JSON document of an /export answer."""
    (file,) = result.files
    data = gzip.decompress(file.data) if file.name.endswith(".gz") else file.data
    return json.loads(data)


@pytest.fixture
async def pipeline(tmp_path):
    async with FakeOpenAI(default=Echo()) as fake, running_pipeline(make_settings(fake.url), tmp_path) as r:
        yield r


async def run(pipeline, who: dict[str, Any], name: str, args: str = "") -> CommandResult:
    return await pipeline.command(msg(f"/{name} {args}", **who), name, args)


# -- /remember, /unremember ----------------------------------------------------------------


async def test_remember_lists_numbered_notes_in_every_prompt_and_unremember_removes_one(pipeline):
    assert "No notes in this chat yet" in (await run(pipeline, ADA, "remember")).text
    first = (await run(pipeline, ADA, "remember", "Answer in French")).text
    assert first.startswith("Noted (#") and "every answer" in first
    await run(pipeline, BOB, "remember", "Bob is vegetarian")  # anyone may add one
    again = (await run(pipeline, ADA, "remember", "answer in french")).text
    assert again.startswith("I already keep that note")
    listed = (await run(pipeline, BOB, "remember")).text
    notes = numbered(listed)
    assert list(notes) == ["Answer in French (from ada)", "Bob is vegetarian (from bob)"]
    await pipeline.handle(msg("what should we cook tonight?", **ADA))
    why = (await run(pipeline, ADA, "why")).text
    assert '"Answer in French"' in why and '"Bob is vegetarian"' in why  # in the prompt, quoted
    french = notes["Answer in French (from ada)"]
    refused = (await run(pipeline, BOB, "unremember", str(french))).text
    assert (
        refused.startswith("Sorry, only admins")
        and "Answer in French" in (await run(pipeline, BOB, "remember")).text
    )
    gone = (await run(pipeline, BOB, "unremember", f"#{notes['Bob is vegetarian (from bob)']}")).text
    assert gone.startswith("Removed #") and "Bob is vegetarian" in gone  # their own: no admin needed
    assert "Removed" in (await run(pipeline, ADA, "unremember", str(french))).text  # an admin: anyone's
    await pipeline.handle(msg("and tomorrow?", **ADA))
    why = (await run(pipeline, ADA, "why")).text
    assert "Answer in French" not in why and "Notes the chat asked" not in why
    history = await pipeline.memory.facts(CHAT, history=True, kind="note")
    assert {n["value"] for n in history if n["superseded_at"]} == {"Answer in French", "Bob is vegetarian"}


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        ("", "Which note? Send /unremember N"),
        ("two", "Which note? Send /unremember N"),
        ("-3", "Which note?"),
        ("1.5", "Which note?"),
        ("٣", "Which note?"),  # an Arabic-Indic digit is not an id
        ("99999999999999999999999", "Which note?"),
        ("4242", "There is no note #4242 here. /remember lists them"),
    ],
)
async def test_unremember_answers_bad_numbers_clearly(pipeline, args, expect):
    await run(pipeline, ADA, "remember", "keep me")
    assert (await run(pipeline, ADA, "unremember", args)).text.startswith(expect)
    assert len(await pipeline.memory.notes(CHAT)) == 1


async def test_a_note_too_long_is_refused_with_the_limit(pipeline):
    answer = (await run(pipeline, ADA, "remember", "x" * 501)).text
    assert answer.startswith("I can't keep that note") and "500" in answer
    assert await pipeline.memory.notes(CHAT) == []


# -- /facts, /forgetfact -------------------------------------------------------------------


async def test_facts_are_numbered_and_forgetfact_removes_own_ones_or_anyones_for_admins(pipeline):
    await pipeline.handle(msg("my name is Ada and I live in Lisbon", **ADA))
    await pipeline.handle(msg("my name is Bob and I live in Porto", **BOB))
    facts = numbered((await run(pipeline, ADA, "facts")).text)
    assert {"name: Ada", "location: Lisbon", "name: Bob", "location: Porto"} <= set(facts)
    mine = (await run(pipeline, BOB, "forgetfact")).text  # no number: their own facts, numbered
    assert numbered(mine) == {"location: Porto": facts["location: Porto"], "name: Bob": facts["name: Bob"]}
    assert "Ada" not in mine and "Lisbon" not in mine

    refused = (await run(pipeline, BOB, "forgetfact", str(facts["location: Lisbon"]))).text
    assert (
        refused
        == f"Sorry, only admins can remove a fact of someone else; #{facts['location: Lisbon']} is not yours."
    )
    assert "Lisbon" in (await run(pipeline, ADA, "facts")).text  # untouched
    own = (await run(pipeline, BOB, "forgetfact", str(facts["location: Porto"]))).text
    assert own.startswith(f"Removed #{facts['location: Porto']} location: Porto") and "history" in own
    by_admin = (await run(pipeline, ADA, "forgetfact", str(facts["name: Bob"]))).text
    assert by_admin.startswith("Removed") and "Bob" in by_admin
    assert (await run(pipeline, ADA, "forgetfact", str(facts["name: Bob"]))).text.startswith(
        "There is no fact #"
    )

    after = (await run(pipeline, ADA, "facts")).text
    assert "Porto" not in after and "name: Bob" not in after and "Lisbon" in after
    history = (await run(pipeline, ADA, "facts", "history")).text
    assert "location: Porto (until " in history and "#" + str(facts["location: Porto"]) not in history
    await pipeline.handle(msg("where does everyone live?", **ADA))
    why = (await run(pipeline, ADA, "why")).text
    assert '"Lisbon"' in why and "Porto" not in prompt_section(why, "Known facts")


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        ("abc", "Which fact? Send /forgetfact N"),
        ("0", "Which fact?"),
        ("#", "Which fact?"),
        ("777", "There is no fact #777 here."),
    ],
)
async def test_forgetfact_answers_bad_numbers_clearly(pipeline, args, expect):
    await pipeline.handle(msg("my name is Ada", **ADA))
    assert (await run(pipeline, BOB, "forgetfact", args)).text.startswith(expect)
    assert len(await pipeline.memory.facts(CHAT, kind="fact")) == 1


async def test_forgetfact_of_a_note_points_to_unremember(pipeline):
    await run(pipeline, ADA, "remember", "meetings are on Tuesdays")
    (note,) = await pipeline.memory.notes(CHAT)
    answer = (await run(pipeline, ADA, "forgetfact", str(note["id"]))).text
    assert answer == f"#{note['id']} is a note, not a fact: /unremember {note['id']} removes it."
    assert len(await pipeline.memory.notes(CHAT)) == 1
    assert "meetings" not in (await run(pipeline, ADA, "facts")).text  # /facts lists facts, not notes


# -- /new ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["new", "reset"])
async def test_new_starts_a_topic_seen_through_why(pipeline, name):
    await pipeline.handle(msg("my name is Ada and the launch is on Friday", **ADA))
    await pipeline.handle(msg("we talked about the rocket engine", **ADA))
    started = (await run(pipeline, ADA, name)).text
    assert started.startswith("New topic")
    why = (await run(pipeline, ADA, "why")).text  # before any new answer: said under the old prompt
    assert "New topic since " in why and "(/new)" in why
    await pipeline.handle(msg("totally different: how do I bake bread?", **ADA))
    why = (await run(pipeline, ADA, "why")).text
    recent = prompt_section(why, "Recent messages")
    assert "(new topic started " in why and "New topic since" not in why  # said once
    assert "rocket engine" not in recent and "launch is on Friday" not in recent
    assert 'name = "Ada"' in why  # facts stay
    found = await pipeline.memory.search(CHAT, "rocket engine")
    assert any("rocket engine" in m["text"] for m in found)  # search stays


# -- /export -------------------------------------------------------------------------------


async def test_export_then_forgetme_then_export_holds_nothing_of_theirs(pipeline):
    await pipeline.handle(msg("my name is Bob and I have a dog called Rex", **BOB))
    await pipeline.handle(msg("my name is Ada", **ADA))
    await run(pipeline, BOB, "remember", "Bob's birthday party is on May 3")
    first = await run(pipeline, BOB, "export")
    assert first.private and [f.name for f in first.files] == ["export.json"]
    assert first.files[0].mime == "application/json" and first.text.startswith(
        "Your data in this chat: 2 messages"
    )
    data = exported(first)
    assert data["export"]["author_id"] == "u2" and data["export"]["chat_key"] == CHAT
    texts = [m["text"] for m in data["messages"]]
    assert texts[0] == "my name is Bob and I have a dog called Rex" and texts[1].startswith("echo:")
    assert not any("Ada" in t for t in texts)  # nothing of anyone else
    assert {f["value"] for f in data["facts"]} >= {"Bob"} and all(
        f["author_id"] == "u2" for f in data["facts"]
    )
    assert [n["value"] for n in data["notes"]] == ["Bob's birthday party is on May 3"]
    assert all(f["updated_at"] for f in data["facts"]) and all(m["ts"] for m in data["messages"])

    await run(pipeline, BOB, "forgetme")
    second = await run(pipeline, BOB, "export")
    assert second.text == own_data.NOTHING_OF_YOURS
    empty = exported(second)
    assert empty["messages"] == [] and empty["facts"] == [] and empty["notes"] == []
    assert "Bob" not in second.files[0].data.decode() and "Rex" not in second.files[0].data.decode()
    assert exported(await run(pipeline, ADA, "export"))["facts"][0]["value"] == "Ada"  # Ada keeps hers


async def test_export_keeps_the_history_of_a_removed_fact(pipeline):
    await pipeline.handle(msg("I live in Lisbon", **ADA))
    await pipeline.handle(msg("I live in Porto now", **ADA))
    (current,) = [f for f in await pipeline.memory.facts(CHAT, kind="fact") if f["key"] == "location"]
    await run(pipeline, ADA, "forgetfact", str(current["id"]))
    facts = exported(await run(pipeline, ADA, "export"))["facts"]
    locations = [(f["value"], bool(f["superseded_at"])) for f in facts if f["key"] == "location"]
    assert locations == [("Lisbon", True), ("Porto", True)]


async def test_export_all_is_for_admins_and_follows_every_page(pipeline):
    history = [
        {"role": "user", "text": f"old message number {i}", "author": "carol", "author_id": "u3"}
        for i in range(1234)
    ]
    await pipeline.memory.import_messages(CHAT, history)
    await pipeline.handle(msg("my name is Bob", **BOB))
    refused = await run(pipeline, BOB, "export", "all")
    assert refused.text.startswith("Sorry, /export all is only for admins") and not refused.files
    unknown = await run(pipeline, BOB, "export", "everything")
    assert unknown.text.startswith("I don't know /export everything") and not unknown.files
    whole = await run(pipeline, ADA, "export", "ALL")
    data = exported(whole)
    assert data["export"]["author_id"] is None and len(data["messages"]) == 1236  # three pages of 500
    assert [m["id"] for m in data["messages"]] == sorted(m["id"] for m in data["messages"])
    assert len({m["id"] for m in data["messages"]}) == 1236 and "summary" in data
    assert whole.text.startswith("This chat's whole memory: 1236 messages")


async def test_an_export_over_the_upload_limit_is_sent_gzipped(pipeline, monkeypatch):
    await pipeline.handle(msg("my name is Ada " + "and more words " * 200, **ADA))
    monkeypatch.setitem(own_data.UPLOAD_LIMIT, "console", 2000)
    result = await run(pipeline, ADA, "export")
    (file,) = result.files
    assert file.name == "export.json.gz" and file.mime == "application/gzip" and len(file.data) < 2000
    assert exported(result)["messages"][0]["text"].startswith("my name is Ada")
    monkeypatch.setitem(own_data.UPLOAD_LIMIT, "console", 50)
    too_big = await run(pipeline, ADA, "export")
    assert not too_big.files and "too big to send here" in too_big.text


# -- the console, as people run it ---------------------------------------------------------


def _chat(tmp_path: Path, lines: list[str]) -> list[str]:
    """The answers of one `chatbot chat` run; the last line's answer may hold blank lines (/why)."""
    blocks = console_chat(tmp_path, lines).split("\n\n")[:-1]
    return [*blocks[: len(lines) - 1], "\n\n".join(blocks[len(lines) - 1 :])]


def test_console_export_forgetme_export_and_remember_forgetfact_new_through_why(tmp_path):
    path = tmp_path / "data" / "export-console_grace.json"
    answers = _chat(
        tmp_path,
        [
            "my name is Grace and I live in Tallinn",
            "/export",
            "/remember Grace wants answers in verse",
            "/forgetfact",
            "the ferry to Helsinki leaves at nine",
            "/new",
            "/why",
        ],
    )
    saved = f"\n(file saved to {path})"
    assert answers[1] == own_data.EXPORT_TEXT.format(what="2 messages, 2 facts, 0 notes") + saved
    first = json.loads(path.read_text())
    assert first["messages"][0]["text"] == "my name is Grace and I live in Tallinn"
    assert first["export"]["chat_key"] == "console:grace"
    facts = numbered(answers[3])
    assert set(facts) == {"name: Grace", "location: Tallinn"}
    assert "Recent messages:" in answers[6] and answers[6].endswith(
        "(/new): recent messages begin there from the next answer."
    )
    (why,) = _chat(tmp_path, ["tell me something new", "/why"])[1:]
    assert "(new topic started" in why and "ferry to Helsinki" not in prompt_section(why, "Recent messages")
    assert '"Grace wants answers in verse"' in why and '"Tallinn"' in why

    removed, _, why = _chat(
        tmp_path, [f"/forgetfact {facts['location: Tallinn']}", "what do you know?", "/why"]
    )
    assert removed.startswith(f"Removed #{facts['location: Tallinn']} location: Tallinn")
    assert "Tallinn" not in prompt_section(why, "Known facts") and '"Grace"' in why

    forgot, empty = _chat(tmp_path, ["/forgetme", "/export"])
    assert forgot.startswith("Done") and empty == own_data.NOTHING_OF_YOURS + saved
    second = path.read_text()
    assert json.loads(second)["messages"] == [] and json.loads(second)["facts"] == []
    assert json.loads(second)["notes"] == [] and "Grace" not in second and "Tallinn" not in second


async def test_export_json_is_valid_for_any_cut_of_pages():
    async def pages(*cuts: list[dict]) -> Any:
        yield {"export": {"upto": 3}, "facts": [], "messages": cuts[0], "next_after": 1}
        for cut in cuts[1:]:
            yield {"export": {"upto": 3}, "messages": cut, "next_after": None}

    one, two, three = ({"id": i, "text": f'm{i} \u2028 "quoted" ✓'} for i in (1, 2, 3))
    for cuts in ([[one, two, three]], [[], [one], [two, three]], [[one], [], [two], [three]], [[]]):
        data, header = await own_data.export_json(pages(*cuts))
        doc = json.loads(data)
        assert header == {"export": {"upto": 3}, "facts": []}
        assert doc["messages"] == [m for cut in cuts for m in cut] and doc["export"] == {"upto": 3}

    async def nothing() -> Any:
        return
        yield

    data, header = await own_data.export_json(nothing())
    assert json.loads(data) == {"messages": []} and header == {}


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("export", ""),
        ("export", "all"),
        ("remember", "x"),
        ("remember", ""),
        ("unremember", "1"),
        ("forgetfact", "1"),
        ("forgetfact", ""),
        ("new", ""),
    ],
)
async def test_with_the_memory_unreachable_each_command_says_so_and_sends_no_file(tmp_path, name, args):
    settings = make_settings(None, api_key=None, memory_url="http://127.0.0.1:9", memory_token="x" * 20)
    async with running_pipeline(settings, tmp_path) as pipeline:
        result = await run(pipeline, ADA, name, args)
    assert result.text == MEMORY_DOWN
    assert not result.files
