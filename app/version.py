"""The installed version of blastrate (``0.0.0`` when run from a bare source tree).

A module of its own so that the routes and the command line can read it without
importing the ``app`` package's lazy front ends (and so without an import cycle).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("blastrate")
except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0.0.0"
