"""The activity record: who changed what, when, through which front end."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.rules import ActivityAction, FrontEnd
from app.schemas.common import UtcTime


class ActivityEntry(BaseModel):
    id: int
    at: UtcTime = Field(description="When the change was committed")
    subject: str = Field(description="Who made it")
    via: FrontEnd = Field(description="The front end it came through")
    action: ActivityAction
    fact_id: int | None = Field(
        default=None, description="The fact stored, superseding, or deleted"
    )
    supersedes_id: int | None = Field(default=None, description="The fact a supersede replaced")
    path: str | None = Field(default=None, description="The fact's path, or the tagged node")
    tag: str | None = Field(default=None, description="key=value set, or the key removed")
    policy: str | None = Field(default=None, description="The policy line added or removed")
    jti: str | None = Field(default=None, description="The token issued or revoked")
    note: str | None = Field(
        default=None, description="Whose token; what an import or restore added"
    )


class ActivityPage(BaseModel):
    entries: list[ActivityEntry] = Field(description="Newest first")
    next_cursor: str | None
