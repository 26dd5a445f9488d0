"""The register route served from the app's innermost middleware
(:class:`app.api.register.RegisterLane`): a registration does not pass through Starlette's
exception middleware or the router, other requests do, and an app whose router would give the
request to another route (one declared ahead at the same path) is served by its router.
That the lane answers as FastAPI's resolver answers (statuses and bodies, every kind of bad
request) is ``tests/api/test_register_route.py``'s comparison, whose reference app the lane
stands aside for.

Shown able to fail: without the lane (``create_app`` passing none to the middleware), the
registration entered the exception middleware once (``assert 1 == 0``)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.middleware.exceptions import ExceptionMiddleware

from app.api.routers.invocations import register_invocation
from app.db.uow import Database
from app.main import create_app
from app.schemas.invocations import InvocationCreated
from app.settings import Settings
from tests.support import AUTH, basic_dataset

PATH = "/v1/datasets/{dataset_id}/invocations"
PURE = {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}


@pytest.fixture
def entered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the HTTP requests that enter Starlette's exception middleware."""
    paths: list[str] = []
    real = ExceptionMiddleware.__call__

    async def counting(self: ExceptionMiddleware, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            paths.append(scope["path"])
        await real(self, scope, receive, send)

    monkeypatch.setattr(ExceptionMiddleware, "__call__", counting)
    return paths


def test_a_registration_skips_the_router_and_its_errors_get_the_apps_handlers(
    settings: Settings, database: Database, entered: list[str]
) -> None:
    with TestClient(create_app(settings, database)) as client:
        dataset_id = basic_dataset(client, epsilon="1")["id"]
        entered.clear()
        created = client.post(PATH.format(dataset_id=dataset_id), json=PURE, headers=AUTH)
        assert created.status_code == 201
        assert created.json()["charge"] == {"epsilon": "0.1", "delta": "0"}
        assert entered == []
        missing = client.post(PATH.format(dataset_id="ds_missing"), json=PURE, headers=AUTH)
        assert (missing.status_code, missing.json()) == (
            404,
            {"error": "NotFound", "detail": "dataset 'ds_missing' not found"},
        )
        invalid = client.post(PATH.format(dataset_id=dataset_id), json={}, headers=AUTH)
        assert invalid.status_code == 422
        assert invalid.json()["error"] == "ValidationError"
        assert entered == []
        # every other route goes through the router (and its exception middleware)
        assert client.get(f"/v1/datasets/{dataset_id}", headers=AUTH).status_code == 200
        assert entered == [f"/v1/datasets/{dataset_id}"]
        # a method the route does not serve goes to the router too (405 there)
        assert (
            client.put(PATH.format(dataset_id=dataset_id), json=PURE, headers=AUTH).status_code
            == 405
        )
        assert len(entered) == 2
    metrics = client.app.state.metrics.render().decode()  # type: ignore[attr-defined]
    assert 'route="/v1/datasets/{dataset_id}/invocations",status="201"} 1.0' in metrics
    assert 'route="/v1/datasets/{dataset_id}/invocations",status="404"} 1.0' in metrics


def test_a_route_declared_ahead_takes_the_requests_through_the_router(
    settings: Settings, database: Database, entered: list[str]
) -> None:
    app = create_app(settings, database)
    app.router.add_api_route(
        PATH, register_invocation, methods=["POST"], status_code=201,
        response_model=InvocationCreated, name="register_invocation",
    )  # fmt: skip
    app.router.routes.insert(0, app.router.routes.pop())
    assert isinstance(app.router.routes[0], APIRoute)
    with TestClient(app) as client:
        dataset_id = basic_dataset(client, epsilon="1")["id"]
        entered.clear()
        created = client.post(PATH.format(dataset_id=dataset_id), json=PURE, headers=AUTH)
        assert created.status_code == 201
        assert entered == [PATH.format(dataset_id=dataset_id)]
