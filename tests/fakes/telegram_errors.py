"""The fake Bot API's error answer (ApiError) and its 400 Bad Request."""

from __future__ import annotations


class ApiError(Exception):
    """A Bot API error answer: {"ok": false, "error_code", "description", "parameters"?}."""

    def __init__(self, code: int, description: str, parameters: dict | None = None) -> None:
        super().__init__(description)
        self.code, self.description, self.parameters = code, description, parameters


def bad(description: str) -> ApiError:
    """A 400 Bad Request with the real server's wording."""
    return ApiError(400, f"Bad Request: {description}")
