"""HTTP and command-line front ends of blastrate.

``app.main:app`` is the ASGI application, built by :func:`create_app` from
:class:`Settings`; ``app.commands:main`` is the ``blastrate`` command line.  The two names are
imported on first use, so that the command line starts without loading the web stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .service.factory import create_app
    from .settings import Settings
    from .version import __version__

__all__ = ["Settings", "__version__", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .service.factory import create_app

        return create_app
    if name == "__version__":
        # The package metadata is read on first use: a command does not pay for it.
        from .version import __version__

        return __version__
    if name == "Settings":
        from .settings import Settings

        return Settings
    raise AttributeError(f"module 'app' has no attribute {name!r}")
