"""``/docs`` works offline: Swagger UI comes from the package (issue #13, item 13).

FastAPI's default page loads its script and style sheet from a CDN, a blank page on a
host without Internet access.
"""

from __future__ import annotations

import re
from typing import Any

from app.service.docs import ASSETS_URL


def test_docs_reference_no_external_host(client: Any) -> None:
    r = client.get("/docs")
    assert r.status_code == 200
    html = r.text
    assert "SwaggerUIBundle" in html
    # Every URL in the page is a path on this server.
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", html)
    assert urls, html
    for url in urls:
        assert url.startswith("/"), url
    assert "http://" not in html and "https://" not in html
    assert "//cdn" not in html


def test_docs_assets_are_served(client: Any) -> None:
    html = client.get("/docs").text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"):
        assert f"{ASSETS_URL}/{asset}" in html
        r = client.get(f"{ASSETS_URL}/{asset}")
        assert r.status_code == 200, asset
        assert len(r.content) > 500, asset
    js = client.get(f"{ASSETS_URL}/swagger-ui-bundle.js")
    assert "javascript" in js.headers["content-type"]
    assert "SwaggerUIBundle" in js.text
    # Swagger UI 5 reads OpenAPI 3.1, the version FastAPI writes.
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")


def test_redoc_is_not_offered_from_a_cdn(client: Any) -> None:
    assert client.get("/redoc").status_code == 404
