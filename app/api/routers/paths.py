"""The tree: a node with its tags, children and counts; tags on nodes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Response, status

from app.api.deps import MemoryDep, SubjectDep
from app.api.problems import located
from app.api.responses import AUTHED, WITH_BODY, problems
from app.rules import MAX_PATH_TAGS
from app.schemas.paths import PathOut
from app.usecases.memory import Node

router = APIRouter(prefix="/v1/paths", tags=["paths"])

# `{path:path}` takes the slashes of the topic path; empty is the root.
TopicPath = Annotated[
    str,
    Path(
        description="Topic path without its leading '/'; empty: the root",
        examples=["projects/embornal"],
    ),
]


def _topic(raw: str) -> str:
    return "/" + raw.lstrip("/")


@router.get(
    "/{path:path}",
    response_model=PathOut,
    operation_id="get_path",
    responses=problems(*AUTHED, 404),
)
def get_path(path: TopicPath, memory: MemoryDep, subject: SubjectDep) -> Node:
    """Show a node: its tags, visible children and fact counts."""
    with located("path"):
        return memory.describe_path(subject, _topic(path))


@router.put(
    "/{path:path}/tags",
    response_model=PathOut,
    operation_id="set_path_tags",
    responses=problems(*AUTHED, *WITH_BODY, 403, 404),
)
def set_path_tags(
    path: TopicPath,
    tags: Annotated[
        dict[str, str],
        Body(max_length=MAX_PATH_TAGS, examples=[{"visibility": "public"}]),
    ],
    memory: MemoryDep,
    subject: SubjectDep,
) -> Node:
    """Set tags on a node (added or replaced); facts below inherit them, nearest wins."""
    with located("body"):
        return memory.set_path_tags(subject, _topic(path), tags)


@router.delete(
    "/{path:path}/tags/{key}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    operation_id="delete_path_tag",
    responses=problems(*AUTHED, 403, 404),
)
def delete_path_tag(
    path: TopicPath,
    key: Annotated[str, Path(max_length=64, examples=["visibility"])],
    memory: MemoryDep,
    subject: SubjectDep,
) -> None:
    """Remove one tag from a node."""
    with located("path"):
        memory.remove_path_tag(subject, _topic(path), key)
