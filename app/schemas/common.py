"""Shapes shared by every resource: the request base and the problem body."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

from app.rules import AS_OF_TODAY


class RequestModel(BaseModel):
    """Every request body: an unknown field is a 422, never silently dropped, and a value of
    the wrong JSON type is a 422, never coerced (`"peek": 0` is not `false`)."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _to_utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


# RFC 3339 in UTC; pydantic writes a zero offset as `Z`.
UtcTime = Annotated[AwareDatetime, AfterValidator(_to_utc)]


class FieldError(BaseModel):
    """One field at fault: where it is in the request, and what is wrong with it."""

    loc: list[str | int] = Field(description="Where: e.g. ['body', 'facts', 3, 'content']")
    msg: str


class Problem(BaseModel):
    """An RFC 9457 problem: every error the API gives has this shape."""

    type: str = Field(description="A URI reference naming the kind of problem")
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = Field(
        default=None, description="For invalid input: the fields at fault"
    )


AS_OF_DESCRIPTION = (
    "RFC 3339 date-time with a timezone (e.g. 2026-12-01T09:30:00Z): answer as the "
    "memory stood at that moment. Facts created later do not exist; a fact superseded "
    "or deleted later is still current. Never a recall. Strength, the recall state, "
    "path tags (so effective_tags) and access rules are today's: the memory keeps no "
    "history of them. In the future or before the memory began: 422."
)


class AsOf(BaseModel):
    """The moment an answer shows, and what in it is not rewound."""

    at: UtcTime = Field(description="The moment asked for, in UTC")
    today: list[str] = Field(
        default_factory=lambda: list(AS_OF_TODAY),
        description=(
            "What the answer shows as it is now, not as it was then: the memory records "
            "when facts were created, superseded and deleted, but keeps no history of "
            "recalls, path tags or policies"
        ),
    )


def as_of_note(value: object) -> object:
    """A use case's moment (a datetime) as the AsOf note; anything else as it is."""
    if isinstance(value, datetime):
        return {"at": value}
    return value
