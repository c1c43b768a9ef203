"""The HTTP service: the application factory, its middleware and connection limits, its
routes, the result cache, metrics and logs, the live probe, warm-up, and the web page.

``app.main:app`` is the ASGI application built here (:func:`.factory.create_app`).
"""

__all__: list[str] = []
