"""The ASGI application: ``uvicorn app.main:app``.

Settings come from ``BLASTRATE_*`` environment variables (see :class:`app.Settings`).
"""

from .service.factory import create_app

app = create_app()
