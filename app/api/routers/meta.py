"""Who the caller is."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.deps import MemoryDep, SubjectDep
from app.api.responses import problems
from app.schemas.meta import WhoAmI

router = APIRouter(prefix="/v1", tags=["meta"])


@router.get(
    "/whoami", response_model=WhoAmI, operation_id="whoami", responses=problems(401, 500, 503)
)
def whoami(memory: MemoryDep, subject: SubjectDep) -> dict[str, Any]:
    """Show the subject of the token, its roles and its effective permissions."""
    return memory.whoami(subject)
