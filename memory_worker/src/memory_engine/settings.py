"""The engine's settings as the hosts read them: one name each, in the Worker and the local host.

The Worker reads its vars (`wrangler.toml [vars]`), the local host its environment; both
pass a getter here, so a setting has the same name and the same rules in both.
"""

from __future__ import annotations

from collections.abc import Callable

RETENTION = "RETENTION_MESSAGES"
# Old names still accepted, each with a deprecation warning: old name -> current name.
DEPRECATED = {"MEMORY_RETENTION_MESSAGES": RETENTION}


def retention_setting(get: Callable[[str], str | None]) -> tuple[int | None, list[str]]:
    """The archived-messages cap per chat (None: the engine's default) and the warnings to log.

    `get(name)` returns the setting's text, or None when it is unset or empty.
    """
    warnings: list[str] = []
    name, raw = RETENTION, get(RETENTION)
    for old, new in DEPRECATED.items():
        if new != RETENTION or get(old) is None:
            continue
        if raw is None:
            name, raw = old, get(old)
            warnings.append(f"{old} is deprecated: use {new} (the same value) instead")
        else:
            warnings.append(f"{old} is deprecated and ignored: {new} is set")
    if raw is None:
        return None, warnings
    text = raw.strip()
    if not (text.isascii() and text.isdigit()):
        warnings.append(f"{name}={raw!r} is not a whole number of messages: using the default")
        return None, warnings
    return int(text), warnings
