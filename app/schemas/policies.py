"""Policy lines as the seed writes them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.schemas.common import RequestModel


class PolicyIn(RequestModel):
    line: str = Field(
        max_length=1024,
        description=(
            "`p, SUBJECT, OBJECT, ACTION, EFFECT` with ACTION read, write, delete or tag, "
            "or `g, MEMBER, ROLE`. A g line may not make a name in use as a subject a role."
        ),
        examples=[
            "p, alice, path:/work/acme/*, read, allow",
            "p, alice, path:/work/acme/*, tag, allow",
            "g, alice, team-acme",
        ],
    )


class Policy(BaseModel):
    line: str
    ptype: str = Field(description="p (a rule) or g (a role membership)")
    values: list[str]


class PolicyList(BaseModel):
    policies: list[Policy]
