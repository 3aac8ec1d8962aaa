"""Tokens the memory signed: what is recorded of them (never the token), and a new one."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.auth.subjects import MAX_SUBJECT_CHARS
from app.rules import MAX_LABEL_CHARS, TokenStatus
from app.schemas.common import RequestModel, UtcTime


class TokenIn(RequestModel):
    subject: str | None = Field(
        default=None,
        max_length=MAX_SUBJECT_CHARS,
        description="Whose token; yours when left out. Another subject's needs the admin role",
        examples=["agent-7"],
    )
    expires_in: str = Field(
        default="30d",
        max_length=32,
        description=(
            "Lifetime: 30d, 12h, 2w, 1d12h ... A token for yourself lives at most "
            "auth.max_token_lifetime (30 days when that is off)"
        ),
        examples=["30d"],
    )
    label: str | None = Field(
        default=None,
        max_length=MAX_LABEL_CHARS,
        description="What the token is for, for people reading the list",
        examples=["kitchen agent on the NAS"],
    )


class TokenOut(BaseModel):
    jti: str = Field(description="The token's id (its `jti` claim): what revoking names")
    subject: str | None = Field(description="Whose token; null for a jti not issued here")
    label: str | None
    issued_by: str | None = Field(description="The subject that issued it")
    issued_at: UtcTime | None
    expires_at: UtcTime | None
    revoked_at: UtcTime | None
    revoked_by: str | None
    status: TokenStatus
    issued_here: bool = Field(
        description=(
            "False for a jti an admin revoked that another issuer (an identity provider) "
            "made: tokens carrying it are refused all the same"
        )
    )


class TokenList(BaseModel):
    tokens: list[TokenOut]


class IssuedTokenOut(TokenOut):
    token: str = Field(
        description="The bearer token, shown this once: the memory keeps only its record"
    )
