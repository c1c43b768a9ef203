"""The committed API contract: ``openapi/openapi.json``, generated from the app.

``scripts/openapi`` rewrites the file; ``tests/app/test_openapi_contract.py`` fails when
the app's schema and the file differ.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["CONTRACT_PATH", "openapi_document", "render", "write_contract"]

CONTRACT_PATH = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of an app built with default settings."""
    from app.settings import Settings

    from .factory import create_app

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


def main(argv: list[str] | None = None) -> int:
    """``python -m app.service.contract [PATH] [--check]``: write the contract, or compare
    with it."""
    parser = argparse.ArgumentParser(
        prog="python -m app.service.contract",
        description="Write the app's OpenAPI document to PATH, or compare PATH with it.",
    )
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=CONTRACT_PATH,
        help="the file to write (or, with --check, to compare); default openapi/openapi.json",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the file differs from the app's schema"
    )
    args = parser.parse_args(argv)
    if args.check:
        same = args.path.is_file() and args.path.read_text() == render(openapi_document())
        print(f"{args.path}: {'matches the app' if same else 'differs from the app'}")
        return 0 if same else 1
    print(f"wrote {write_contract(args.path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
