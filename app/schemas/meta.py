"""Who the caller is, and how the service is doing."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Permission(BaseModel):
    subject: str = Field(description="The principal the rule is written for")
    object: str = Field(description="path:/a/b (a node), path:/a/b/* (a subtree) or tag:key=value")
    action: str = Field(
        description="read, write, delete or tag (setting path tags). Only a path rule "
        "allows write or tag; a tag rule naming them can only deny."
    )
    effect: str = Field(description="allow or deny; a deny beats every allow")


class WhoAmI(BaseModel):
    subject: str = Field(description="The token's `sub`; never a role name")
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
    index: Check = Field(
        description="The vector index: loaded into this process's memory (SQLite); in the "
        "database, with the pgvector extension and its HNSW index (PostgreSQL). `detail` "
        "names a part a restore left out, and how to put it back"
    )
