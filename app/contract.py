"""The committed API contract: ``openapi/openapi.json``, generated from the app.

``scripts/openapi`` rewrites the file; ``tests/app/test_openapi_contract.py`` fails when
the app's schema and the file differ.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["CONTRACT_PATH", "openapi_document", "render", "write_contract"]

CONTRACT_PATH = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of an app built with default settings."""
    from .factory import create_app
    from .settings import Settings

    document: dict[str, Any] = create_app(Settings(warm_up=False)).openapi()
    return document


def render(document: dict[str, Any]) -> str:
    """The file's text: two-space indented JSON with a final newline."""
    return json.dumps(document, indent=2, ensure_ascii=True) + "\n"


def write_contract(path: Path = CONTRACT_PATH) -> Path:
    """Write the app's OpenAPI document to ``path`` and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(openapi_document()))
    return path


if __name__ == "__main__":
    target = write_contract(Path(sys.argv[1]) if len(sys.argv) > 1 else CONTRACT_PATH)
    print(f"wrote {target}")
