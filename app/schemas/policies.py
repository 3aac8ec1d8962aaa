"""Policy lines as the seed writes them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.schemas.common import RequestModel


class PolicyIn(RequestModel):
    line: str = Field(
        max_length=1024,
        examples=["p, alice, path:/work/acme/*, read, allow", "g, alice, team-acme"],
    )


class Policy(BaseModel):
    line: str
    ptype: str = Field(description="p (a rule) or g (a role membership)")
    values: list[str]


class PolicyList(BaseModel):
    policies: list[Policy]
