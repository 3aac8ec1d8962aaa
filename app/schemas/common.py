"""Shapes shared by every resource: the request base and the problem body."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field


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
