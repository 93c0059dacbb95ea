"""Issue 40, probe item 4: pasted secrets are neither stored nor sent to the model.

Configured keys, `sk-...`, bearer and Telegram tokens were redacted; GitHub, AWS, Slack,
Google, Stripe and Discord tokens, JWTs, private keys, and a configured key split by a
zero-width character were not. Each sample is made here from its documented shape (no real
token), and ordinary words that share a prefix stay as they are.
"""

from __future__ import annotations

import pytest

from bot.chat.prompt import redact
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import API_KEY, make_settings, msg, running_pipeline

A36 = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"  # 36 letters and digits
KEY_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" * 3
SAMPLES = {
    "github classic": "ghp_" + A36,
    "github fine-grained": "github_pat_11ABCDEFG0" + A36 + "_" + A36[:20],
    "github oauth": "gho_" + A36,
    "aws access key id": "AKIA" + "IOSFODNN7EXAMPL1",
    "aws secret key": "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    "slack bot": "xoxb-" + "123456789012-1234567890123-" + A36[:24],
    "slack webhook": "https://hooks.slack.com/services/" + "T00000000/B00000000/" + A36[:24],
    "google api key": "AIza" + "SyD" + A36[:32],
    "google oauth secret": "GOCSPX-" + A36[:28],
    "stripe live": "sk_live_" + A36 + A36,
    "stripe test": "rk_test_" + A36[:24],
    "discord bot": "MTA" + A36[:23] + ".G" + "aBcDe" + "." + A36[:30],
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + A36[:43],
    "private key": "-----BEGIN RSA PRIVATE KEY-----\n"
    + KEY_BODY[:64]
    + "\n"
    + KEY_BODY[64:128]
    + "\n-----END RSA PRIVATE KEY-----",
    "openssh key": "-----BEGIN OPENSSH PRIVATE KEY-----\n" + KEY_BODY[:70] + "\n" + KEY_BODY[70:140],
    "configured key split": API_KEY[:6] + "\u200b" + API_KEY[6:14] + "\u2060" + API_KEY[14:],
}
# The part of each sample that must not survive: the whole token, or its secret part.
SECRET_PART = {name: s for name, s in SAMPLES.items()}
SECRET_PART["aws secret key"] = SAMPLES["aws secret key"].split("= ")[1]
SECRET_PART["private key"] = KEY_BODY[64:128]
SECRET_PART["openssh key"] = KEY_BODY[70:140]
SECRET_PART["configured key split"] = API_KEY[14:]
SECRET_PART["stripe live"] = A36 + A36


def invisible_free(text: str) -> str:
    return "".join(c for c in text if c not in "\u200b\u200c\u200d\u2060\ufeff\u00ad")


@pytest.mark.parametrize("name", SAMPLES)
def test_each_kind_of_secret_is_redacted(name):
    said = f"here it is: {SAMPLES[name]} thanks"
    out = redact(said, [API_KEY])
    assert "[redacted]" in out, out
    assert SECRET_PART[name] not in invisible_free(out), out
    assert out.startswith("here it is: ") and out.endswith(" thanks"), out


@pytest.mark.parametrize(
    "plain",
    [
        "AKIA is a word in no language, and ghp is short",
        "see https://example.org/path?a=1 and sk_live_ alone",
        "family 👨\u200d👩\u200d👧 and soft\u00adhyphen stay",
        "eyJ alone, and a.b.c",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A\n-----END PUBLIC KEY-----",
    ],
)
def test_ordinary_text_is_left_alone(plain):
    assert redact(plain, [API_KEY]) == plain


async def test_no_pasted_secret_is_stored_or_sent(tmp_path):
    async with (
        FakeOpenAI(default=Echo()) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        for i, (name, sample) in enumerate(SAMPLES.items()):
            await pipeline.handle(msg(f"my {name} is {sample}", message_id=f"m{i}"))
        usage = await pipeline.memory.usage("test:chat")
        sent = " ".join(str(m["content"]) for r in fake.requests for m in r.messages)
    stored = " ".join(str(r.get("text") or "") for r in usage["recent"])
    for name in SAMPLES:
        for where in (stored, sent):
            assert SECRET_PART[name] not in invisible_free(where), name
