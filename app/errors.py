"""One exception hierarchy. Each error carries its HTTP status and a problem type.

Services raise these; the API turns them into RFC 9457 problem+json and the CLI
into a one-line message with exit status 1. Their messages are written for the
user: they never hold SQL, a stack trace or a server file path.
"""

from __future__ import annotations

from typing import Any


class EmbornalError(Exception):
    status = 500
    type = "about:blank"
    title = "Internal Server Error"

    def __init__(self, detail: str, *, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors


class ConfigError(EmbornalError):
    """The configuration cannot be used: start-up stops."""

    title = "Configuration error"


class StartupError(EmbornalError):
    """The memory must not start (for example a vector width disagreement)."""

    status = 503
    title = "Service unavailable"


class InvalidInput(EmbornalError):
    status = 422
    type = "/problems/invalid-input"
    title = "Invalid input"


class NotFound(EmbornalError):
    status = 404
    type = "/problems/not-found"
    title = "Not found"


class Forbidden(EmbornalError):
    status = 403
    type = "/problems/forbidden"
    title = "Forbidden"


class Conflict(EmbornalError):
    status = 409
    type = "/problems/conflict"
    title = "Conflict"


class Unauthorized(EmbornalError):
    status = 401
    type = "/problems/unauthorized"
    title = "Unauthorized"


class PayloadTooLarge(EmbornalError):
    status = 413
    type = "/problems/payload-too-large"
    title = "Payload too large"


class UnsupportedMediaType(EmbornalError):
    status = 415
    type = "/problems/unsupported-media-type"
    title = "Unsupported media type"


class Unavailable(EmbornalError):
    status = 503
    type = "/problems/unavailable"
    title = "Service unavailable"
