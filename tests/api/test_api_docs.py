"""/docs and /redoc are served from the installed package: no CDN, a policy that forbids one."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from app.api import docs
from app.main import create_app
from app.settings import Settings

#: Every URL a page loads (script, style sheet, icon, the OpenAPI document).
_LOADED = re.compile(r"""(?:src|href|url|spec-url)\s*[:=]\s*['"]([^'"]+)['"]""")


@pytest.fixture(scope="module")
def client() -> TestClient:
    """The pages need no database: one app for the module."""
    return TestClient(create_app(Settings(database_url="sqlite://")))


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_pages_load_only_this_origin(client: TestClient, page: str) -> None:
    r = client.get(page)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    loaded = _LOADED.findall(r.text)
    assert loaded, r.text  # the pattern finds the page's assets
    assert all(url.startswith("/") and not url.startswith("//") for url in loaded), loaded
    assert "/openapi.json" in loaded
    policy = r.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "http" not in policy  # no host is allowed besides 'self'
    for url in loaded:
        assert client.get(url).status_code == 200, url


def test_the_swagger_page_inline_script_is_allowed_by_its_hash(client: TestClient) -> None:
    r = client.get("/docs")
    (script,) = re.findall(r"<script>(.*?)</script>", r.text, re.DOTALL)
    policy = r.headers["content-security-policy"]
    assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    assert docs._policy([script]) == policy
    assert policy.count("'sha256-") == 1


def test_assets_are_the_packaged_bundles(client: TestClient) -> None:
    r = client.get("/docs/assets/swagger-ui-bundle.js")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/javascript; charset=utf-8"
    assert len(r.content) > 500_000 and b"SwaggerUIBundle" in r.content
    assert client.get("/docs/assets/redoc.standalone.js").content.startswith(b"/*")
    assert client.get("/docs/assets/swagger-ui.css").headers["content-type"].startswith("text/css")


@pytest.mark.parametrize("name", ["core.py", "..%2Fcore.py", "..%2F..%2Fpyproject.toml", "x"])
def test_anything_else_is_404(client: TestClient, name: str) -> None:
    r = client.get(f"/docs/assets/{name}")
    assert r.status_code == 404
    assert r.json()["error"] == "NotFound"
