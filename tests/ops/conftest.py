"""A real `embornal serve` subprocess per test, on a temporary EMBORNAL_HOME."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.ops.live import LiveServer

StartServer = Callable[..., LiveServer]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """`start_server(model="minilm-l6", home=None)`: a ready server with a token for
    `default`. Each one is stopped at the end (terminate, then kill), whatever happened."""
    servers: list[LiveServer] = []

    def start(model: str = "minilm-l6", home: Path | None = None) -> LiveServer:
        server = LiveServer(home or tmp_path / f"home{len(servers)}", model)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def live_server(start_server: StartServer) -> LiveServer:
    """A server with the offline minilm-l6 model, so facts are embedded into facts_vec."""
    return start_server("minilm-l6")
