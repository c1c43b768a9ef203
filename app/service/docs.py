"""Interactive API documentation (Swagger UI) served from the installed package.

FastAPI's default ``/docs`` page loads Swagger UI's script and style sheet from a CDN, so
it is blank on a host without Internet access.  Here the assets come from the
``swagger-ui-bundle-v2`` package (Swagger UI 5, which reads OpenAPI 3.1) and are served
under ``/docs/assets``; the page references no other host.  ReDoc is not offered: it has no
packaged build.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

__all__ = ["ASSETS_URL", "install_docs"]

#: Where the Swagger UI files are served.
ASSETS_URL = "/docs/assets"


def install_docs(app: FastAPI, openapi_url: str = "/openapi.json") -> None:
    """Add ``GET /docs`` (Swagger UI on local assets) and its OAuth2 redirect page.

    Parameters
    ----------
    app : FastAPI
        An app built with ``docs_url=None`` and ``redoc_url=None``.
    openapi_url : str
        Path of the OpenAPI document the page shows.
    """
    app.mount(ASSETS_URL, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")
    title = f"{app.title} - API documentation"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon-32x32.png",
            oauth2_redirect_url="/docs/oauth2-redirect",
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
