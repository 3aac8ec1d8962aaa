"""Print the OpenAPI document: `python -m app.openapi > openapi.json`.

The app is built from default settings and its lifespan never runs, so this
needs no database, key or model.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from app.main import create_app
from app.settings import Settings


def document() -> dict[str, Any]:
    # Nothing in the document depends on where files live or on config values.
    return create_app(Settings()).openapi()


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
