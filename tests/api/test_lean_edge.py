"""The register route's lean edge (``FastRegister``): the common request is served ahead of the
middleware stack and without FastAPI's dependency resolution, every other request by the whole
stack and the FastAPI route itself, so that the answers are the route's in both cases.

Shown able to fail: with ``_parse`` not checking the caller's role, the curator's request was
passed to the service through the fast path and answered 404 (the service's visibility check)
instead of the route's 403."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api import edge
from app.api.edge import FastRegister, OdometerAPI
from app.db.uow import Database
from app.main import create_app
from app.services import invocations as invocations_service
from app.settings import Settings
from tests.support import AUTH, basic_dataset, grant, new_organisation, new_principal

PURE = {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}


class Spy:
    """Counts the requests the fast path handed to the app's stack (and so to the route)."""

    def __init__(self, fast: FastRegister) -> None:
        self.fast = fast
        self.handed = 0
        self.real = fast.fallback

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.handed += 1
        await self.real(scope, receive, send)


@pytest.fixture
def spy(client: TestClient) -> Iterator[Spy]:
    app = client.app
    assert isinstance(app, OdometerAPI) and app.lean is not None
    spy = Spy(app.lean)
    app.lean.fallback = spy
    yield spy
    app.lean.fallback = spy.real


def _path(client: TestClient) -> str:
    return f"/v1/datasets/{basic_dataset(client, epsilon=10)['id']}/invocations"


def test_the_common_request_is_served_by_the_fast_path(client: TestClient, spy: Spy) -> None:
    path = _path(client)
    r = client.post(path, json=PURE, headers={**AUTH, "Idempotency-Key": "fast-1"})
    assert r.status_code == 201, r.text
    assert r.json()["charge"]["epsilon"] == "0.1" and r.json()["ledger_seq"] == 2
    again = client.post(path, json=PURE, headers={**AUTH, "Idempotency-Key": "fast-1"})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.text == r.text
    assert spy.handed == 0


def test_an_analyst_key_is_served_by_the_fast_path(client: TestClient, spy: Spy) -> None:
    org = new_organisation(client)
    r = client.post(
        "/v1/datasets",
        json={"name": "d", "budget": {"epsilon": "1", "delta": "0"}, "organisation_id": org},
        headers=AUTH,
    )
    ds = r.json()["id"]
    analyst, headers = new_principal(client, org, "analyst")
    grant(client, ds, analyst)
    r = client.post(f"/v1/datasets/{ds}/invocations", json=PURE, headers=headers)
    assert r.status_code == 201, r.text
    assert spy.handed == 0
    # a dataset the analyst is not granted: the route answers (404, as for a missing one)
    other = basic_dataset(client)["id"]
    r = client.post(f"/v1/datasets/{other}/invocations", json=PURE, headers=headers)
    assert r.status_code == 404 and r.json()["error"] == "NotFound"


@pytest.mark.parametrize(
    ("headers", "body", "status", "error"),
    [
        ({}, PURE, 401, "Unauthorized"),
        ({"Authorization": "Basic abc"}, PURE, 401, "Unauthorized"),
        ({"Authorization": "Bearer wrong"}, PURE, 401, "Unauthorized"),
        ({**AUTH, "Idempotency-Key": "has space"}, PURE, 422, "ValidationError"),
        (AUTH, {"mechanism": {"type": "pure_dp", "epsilon": "-1"}}, 422, "InvalidDeclaration"),
        (AUTH, {"mechanism": {"type": "nope"}}, 422, "ValidationError"),
        (AUTH, {"mechanism": PURE["mechanism"], "extra": 1}, 422, "ValidationError"),
    ],
)
def test_every_other_request_is_answered_by_the_route(
    client: TestClient,
    spy: Spy,
    headers: dict[str, str],
    body: dict[str, Any],
    status: int,
    error: str,
) -> None:
    r = client.post(_path(client), json=body, headers=headers)
    assert (r.status_code, r.json()["error"]) == (status, error), r.text
    assert spy.handed == 1


def test_a_body_that_is_not_json_is_answered_by_the_route(client: TestClient, spy: Spy) -> None:
    path = _path(client)
    json_type = {**AUTH, "content-type": "application/json"}
    r = client.post(path, content=b"{not json", headers=json_type)
    assert r.status_code == 422 and r.json()["error"] == "ValidationError"
    r = client.post(path, content=b"x=1", headers={**AUTH, "content-type": "text/plain"})
    assert r.status_code == 422
    assert spy.handed == 2


def test_a_curator_is_refused_by_the_route(client: TestClient, spy: Spy) -> None:
    org = new_organisation(client)
    _, headers = new_principal(client, org, "curator")
    r = client.post(_path(client), json=PURE, headers=headers)
    assert r.status_code == 403 and r.json()["error"] == "Forbidden"
    assert spy.handed == 1


def _count(client: TestClient, status: int) -> float:
    """The ``odometer_http_requests`` count of the register route's answers with ``status``."""
    series = (
        'odometer_http_requests_total{method="POST",'
        f'route="/v1/datasets/{{dataset_id}}/invocations",status="{status}"}} '
    )
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(series):
            return float(line.removeprefix(series))
    return 0.0


def test_each_request_is_counted_once_by_route_template_and_status(
    client: TestClient, spy: Spy
) -> None:
    """The fast path records what the metrics middleware records; a request handed to the
    stack is counted there, once."""
    path = _path(client)
    before = {status: _count(client, status) for status in (201, 409, 401, 404)}
    for _ in range(3):
        assert client.post(path, json=PURE, headers=AUTH).status_code == 201
    big = {"mechanism": {"type": "pure_dp", "epsilon": "100"}}
    assert client.post(path, json=big, headers=AUTH).status_code == 409
    assert client.post(path, json=PURE).status_code == 401  # handed to the stack
    missing = "/v1/datasets/ds_missing/invocations"
    assert client.post(missing, json=PURE, headers=AUTH).status_code == 404
    after = {status: _count(client, status) for status in (201, 409, 401, 404)}
    assert {s: after[s] - before[s] for s in after} == {201: 3, 409: 1, 401: 1, 404: 1}
    assert spy.handed == 1
    latency = (
        "odometer_http_request_duration_seconds_count"
        '{method="POST",route="/v1/datasets/{dataset_id}/invocations"}'
    )
    counted = [ln for ln in client.get("/metrics").text.splitlines() if ln.startswith(latency)]
    assert counted and float(counted[0].split()[-1]) == sum(after.values())


def test_a_service_error_is_answered_by_the_apps_handler(client: TestClient, spy: Spy) -> None:
    r = client.post("/v1/datasets/ds_missing/invocations", json=PURE, headers=AUTH)
    assert r.status_code == 404
    assert r.json() == {"error": "NotFound", "detail": "dataset 'ds_missing' not found"}
    assert spy.handed == 0


def test_an_unexpected_error_is_a_500_and_reaches_the_server(
    settings: Settings, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As through Starlette's ``ServerErrorMiddleware``: the app's last-resort handler answers,
    then the error is raised on to the server, which logs it."""

    def broken(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(invocations_service, "register_invocation", broken)
    monkeypatch.setattr(invocations_service, "register_group", broken)  # several in flight
    app = create_app(settings, database)
    with TestClient(app, raise_server_exceptions=False) as quiet:
        r = quiet.post(_path(quiet), json=PURE, headers=AUTH)
        assert r.status_code == 500
        assert r.json() == {"error": "InternalError", "detail": "internal error"}
        assert _count(quiet, 500) == 1
    with TestClient(app) as loud, pytest.raises(RuntimeError, match="boom"):
        loud.post(_path(loud), json=PURE, headers=AUTH)


def test_middleware_added_by_a_deployment_sees_every_request(
    settings: Settings, database: Database
) -> None:
    """The edge only stands in for the middleware it knows: with one more, the register route
    goes through the whole stack again."""
    seen: list[str] = []

    class Tap:
        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                seen.append(f"{scope['method']} {scope['path']}")
            await self.app(scope, receive, send)

    app = create_app(settings, database)
    app.add_middleware(Tap)
    with TestClient(app) as c:
        path = _path(c)
        r = c.post(path, json=PURE, headers=AUTH)
        assert r.status_code == 201, r.text
    assert f"POST {path}" in seen


@pytest.fixture
def worker() -> Iterator[edge._Worker]:
    """The process's ``WORKER``, its published connections restored afterwards."""
    saved = edge.WORKER.connections
    yield edge.WORKER
    edge.WORKER.connections = saved


def _threads(call: Any) -> tuple[int, int]:
    """The event loop's thread and the thread ``edge.blocking`` ran a call in."""

    async def main() -> tuple[int, int]:
        return threading.get_ident(), await call()

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("connections", "on_the_loop"),
    [(None, False), ({"one"}, True), ({"one", "two"}, False), (set(), False)],
    ids=["unknown", "one", "two", "none"],
)
def test_a_lone_connection_runs_the_blocking_call_on_the_event_loop(
    worker: edge._Worker, connections: set[str] | None, on_the_loop: bool
) -> None:
    """On the event loop only where the server said it has exactly one connection open (an
    app not served by ``app.serve`` hears nothing: a thread, as before)."""
    worker.connections = connections
    loop, ran = _threads(lambda: edge.blocking(threading.get_ident))
    assert (ran == loop) is on_the_loop


def test_a_call_still_running_in_a_thread_keeps_the_next_off_the_loop(
    worker: edge._Worker,
) -> None:
    """A request whose client left is cancelled, but its call runs on in its thread (its
    transaction commits or rolls back there). Until it is done the process is not alone: the
    next request's call goes to a thread too, then, once it is done, to the loop again.

    Shown able to fail: with ``alone`` looking at the connections only, the second call ran on
    the loop while the first one's still ran."""
    edge.publish_connections({"one"})
    started, release = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        release.wait(10)

    async def main() -> tuple[int, int, int]:
        first = asyncio.ensure_future(edge.in_thread(slow))
        await asyncio.to_thread(started.wait, 10)
        first.cancel()  # the client left
        with contextlib.suppress(asyncio.CancelledError):
            await first
        second = await edge.blocking(threading.get_ident)
        release.set()
        deadline = time.monotonic() + 10
        while not worker.alone():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.005)
        third = await edge.blocking(threading.get_ident)
        return threading.get_ident(), second, third

    loop, second, third = asyncio.run(main())
    assert second != loop
    assert third == loop


def test_a_registration_whose_charge_may_be_expensive_stays_off_the_loop(
    client: TestClient, spy: Spy, worker: edge._Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone on its connection, a closed-form registration runs on the event loop; one whose
    charge may be expensive (it may wait for a charge worker for up to its CPU budget) still
    goes to a thread, so that a new connection's first request does not wait that long. Both
    are answered as ever."""
    worker.connections = {"one"}
    on_the_loop: list[bool] = []
    real = invocations_service.register_invocation

    def register(*args: Any) -> Any:
        try:
            asyncio.get_running_loop()
            on_the_loop.append(True)
        except RuntimeError:
            on_the_loop.append(False)
        return real(*args)

    monkeypatch.setattr(invocations_service, "register_invocation", register)
    path = _path(client)
    sgd = {"type": "dp_sgd", "noise_multiplier": 10, "sample_rate": "0.001", "steps": 10,
           "delta": "1e-8"}  # fmt: skip
    r = client.post(path, json=PURE, headers=AUTH)
    assert r.status_code == 201, r.text
    r = client.post(path, json={"mechanism": sgd}, headers=AUTH)
    assert r.status_code == 201, r.text
    assert r.json()["ledger_seq"] == 3
    assert on_the_loop == [True, False]
    assert spy.handed == 0
