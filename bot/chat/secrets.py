"""Secrets found in text and replaced by "[redacted]": configured values and known token shapes.

What is matched: every configured secret value (API keys, bot tokens, the memory token),
and the shapes the providers document for their tokens: OpenAI `sk-`, Telegram bot tokens,
bearer headers, GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), AWS access key
ids and a secret access key named as one, Slack (`xox?-`, `xapp-`, webhooks), Google API keys
(`AIza`), OAuth client secrets (`GOCSPX-`) and access tokens (`ya29.`), Stripe (`sk_`, `rk_`,
`pk_live`, `whsec_`), Discord bot tokens, JWTs, and PEM or OpenSSH private keys (the whole
block, or to the end of its body when the END line is missing).

Why not detect-secrets (1.5, the maintained set): its plugins find a line with a secret for
a code scan; redaction needs the whole token's span. Its JWT pattern ends lazily (the
signature would stay), its Stripe pattern stops after 24 characters (today's keys are
longer), its private-key plugin matches the BEGIN line only (the key stays), and it knows
no Google key; it would also bring pyyaml and requests. The shapes here follow the same
public formats, with bounds on every repeat so a scan stays linear.

Invisible characters (zero-width space, joiner, word joiner, soft hyphen, BOM) inside a
token do not hide it: matching runs on the text without them, and the span found covers
them in the original.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

REDACTED = "[redacted]"
_B = r"(?<![A-Za-z0-9_\-])"  # a token starts where a word does
_E = r"(?![A-Za-z0-9_\-])"
PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(_B + r"sk-[A-Za-z0-9_\-]{16,400}"),  # OpenAI (sk-, sk-proj-)
    re.compile(r"\b\d{6,12}:[A-Za-z0-9_\-]{30,100}" + _E),  # Telegram bot tokens
    re.compile(r"(?i)\bbearer\s{1,8}[A-Za-z0-9._~+/\-]{16,2000}=*"),
    re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E),
    re.compile(_B + r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}" + _E),
    re.compile(r"(?i)\baws.{0,20}?(?:secret|key).{0,20}?[\s:=\"']([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
    re.compile(_B + r"(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,250}" + _E),
    re.compile(r"(?i)https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{10,250}"),
    re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}" + _E),  # Google API keys
    re.compile(_B + r"(?:GOCSPX-[A-Za-z0-9_\-]{20,40}|ya29\.[0-9A-Za-z_\-]{20,2000})" + _E),
    re.compile(_B + r"(?:[rs]k_(?:live|test)|pk_live|whsec)_[0-9A-Za-z]{16,247}" + _E),  # Stripe
    re.compile(
        _B + r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,40}" + _E
    ),  # Discord
    re.compile(_B + r"eyJ[A-Za-z0-9_\-]{8,4000}\.eyJ[A-Za-z0-9_\-]{8,8000}\.[A-Za-z0-9_\-]{0,1000}"),  # JWT
)
_KEY_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = re.compile(r"-----END (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?-----")
# Its headers (Proc-Type: 4,ENCRYPTED), then base64 lines: a space ends it.
_KEY_BODY = re.compile(r"(?:\s{0,4}[A-Za-z\-]{1,40}: [^\n]{0,200}\n){0,4}[A-Za-z0-9+/=\r\n]{0,20000}")
_KEY_MAX = 20000  # a 16384-bit RSA key in PEM is under 13 kB
_INVISIBLE = re.compile(r"[\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff]")


@lru_cache(maxsize=8)
def _literals(secrets: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True))


def _key_spans(text: str) -> Iterable[tuple[int, int]]:
    for begin in _KEY_BEGIN.finditer(text):
        end = _KEY_END.search(text, begin.end(), begin.end() + _KEY_MAX)
        if end is not None:
            yield begin.start(), end.end()
        else:  # cut short: the body as far as it goes
            body = _KEY_BODY.match(text, begin.end())
            yield begin.start(), body.end() if body else begin.end()


def secret_spans(text: str, secrets: Iterable[str] = ()) -> list[tuple[int, int]]:
    """Where `text` holds a configured secret or a token of a known shape, merged, in order."""
    spans: list[tuple[int, int]] = []
    for secret in _literals(tuple(secrets)):
        at = text.find(secret)
        while at >= 0:
            spans.append((at, at + len(secret)))
            at = text.find(secret, at + len(secret))
    for pattern in PATTERNS:
        for m in pattern.finditer(text):
            spans.append(m.span(m.lastindex or 0))
    spans.extend(_key_spans(text))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every configured secret and secret-looking token replaced by [redacted]."""
    secrets = tuple(secrets)
    if _INVISIBLE.search(text):
        keep = [i for i, c in enumerate(text) if not _INVISIBLE.match(c)]
        seen = "".join(text[i] for i in keep)
        spans = [(keep[s], keep[e - 1] + 1) for s, e in secret_spans(seen, secrets) if e > s]
    else:
        spans = secret_spans(text, secrets)
    for start, end in reversed(spans):
        text = text[:start] + REDACTED + text[end:]
    return text
