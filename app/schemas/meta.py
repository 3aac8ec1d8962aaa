"""Who the caller is, and how the service is doing."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Permission(BaseModel):
    subject: str = Field(description="The principal the rule is written for")
    object: str
    action: str
    effect: str


class WhoAmI(BaseModel):
    subject: str
    roles: list[str] = Field(description="Roles held, `everyone` included")
    permissions: list[Permission]


class Health(BaseModel):
    status: Literal["ok"]


class Check(BaseModel):
    ok: bool
    detail: str | None = None


class ModelState(BaseModel):
    loaded: bool
    name: str | None = None
    reason: str | None = Field(default=None, description="Why there is no model")


class Ready(BaseModel):
    status: Literal["ready", "unready"]
    database: Check
    migrations: Check
    model: ModelState
    index: Check = Field(description="The vector index: loaded into memory, and its size")
