"""Retries: same idempotency key on connection errors, timeouts and 5xx; never on 4xx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from decimal import Decimal

import httpx
import pytest

from odometer_client import (
    AsyncOdometerClient,
    BudgetExceeded,
    InvalidRequest,
    OdometerClient,
    RetryPolicy,
    ServerError,
    TransportError,
)
from odometer_client import declarations as d
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server

CREATED = {
    "id": "inv_1",
    "dataset_id": "ds_1",
    "status": "accepted",
    "mechanism": {"type": "pure_dp", "epsilon": "0.1"},
    "charge": {"epsilon": "0.1", "delta": "0"},
    "requested": {"epsilon": "0.1", "delta": "0"},
    "remaining": {"epsilon": "0.9", "delta": "0"},
    "ledger_seq": 2,
    "created_at": "2026-01-01T00:00:00.000000Z",
}


def _mock(
    responses: list[Callable[[httpx.Request], httpx.Response]],
) -> tuple[OdometerClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses[min(len(seen), len(responses)) - 1](request)

    client = OdometerClient(
        "http://odometer.test", "k", retry=FAST_RETRY, transport=httpx.MockTransport(handler)
    )
    return client, seen


def _status(code: int, body: dict[str, object]) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(code, json=body)


def _timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def test_5xx_and_timeouts_are_retried_with_the_same_key() -> None:
    client, seen = _mock(
        [
            _status(503, {"error": "ServiceUnavailable", "detail": "db"}),
            _timeout,
            _status(201, CREATED),
        ]
    )
    inv = client.register("ds_1", d.pure_dp("0.1"))
    assert inv.charge["epsilon"] == Decimal("0.1")
    keys = {r.headers["Idempotency-Key"] for r in seen}
    assert len(seen) == 3 and len(keys) == 1
    assert json.loads(seen[0].content) == {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}


def test_a_503s_retry_after_is_waited_for_up_to_the_policys_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service's 503 says how long to wait (e.g. while a failover promotes a standby): the
    client waits that long rather than its millisecond backoff, up to ``max_retry_after``; a
    date or junk in the header leaves the backoff alone."""
    slept: list[float] = []
    monkeypatch.setattr("odometer_client._core.sleep", slept.append)

    def unavailable(after: str) -> Callable[[httpx.Request], httpx.Response]:
        body = {"error": "ServiceUnavailable", "detail": "no primary"}
        return lambda request: httpx.Response(503, json=body, headers={"Retry-After": after})

    client, seen = _mock([unavailable("5"), unavailable("40"), _status(201, CREATED)])
    client.register("ds_1", d.pure_dp("0.1"))
    assert len(seen) == 3 and len({r.headers["Idempotency-Key"] for r in seen}) == 1
    assert slept == [5.0, FAST_RETRY.max_retry_after]  # 40 s capped at the policy's 30 s

    slept.clear()
    client, seen = _mock(
        [unavailable("Wed, 21 Oct 2015 07:28:00 GMT"), unavailable("-1"), _status(201, CREATED)]
    )
    client.register("ds_1", d.pure_dp("0.1"))
    assert len(slept) == 2 and all(0 < s <= FAST_RETRY.max_backoff for s in slept), slept

    slept.clear()
    ignoring = RetryPolicy(retries=1, backoff=0.001, max_backoff=0.01, max_retry_after=0)
    client = OdometerClient(
        "http://odometer.test",
        "k",
        retry=ignoring,
        transport=httpx.MockTransport(lambda request: unavailable("5")(request)),
    )
    with pytest.raises(ServerError):
        client.register("ds_1", d.pure_dp("0.1"))
    assert len(slept) == 1 and slept[0] <= 0.01, slept


def test_4xx_is_never_retried() -> None:
    client, seen = _mock([_status(422, {"error": "InvalidDeclaration", "detail": "no"})])
    with pytest.raises(InvalidRequest):
        client.register("ds_1", d.pure_dp("0.1"))
    assert len(seen) == 1


def test_retries_are_bounded() -> None:
    client, seen = _mock([_status(500, {"error": "InternalError", "detail": "boom"})])
    with pytest.raises(ServerError):
        client.settle("ds_1", "inv_1", "none")
    assert len(seen) == 1 + FAST_RETRY.retries
    client, seen = _mock([_timeout])
    with pytest.raises(TransportError):
        client.cancel("ds_1", "inv_1")
    assert len(seen) == 1 + FAST_RETRY.retries


def test_dataset_creation_is_not_resent_after_a_timeout() -> None:
    """The server does not key dataset creation: a lost answer must not create two."""
    client, seen = _mock([_timeout])
    with pytest.raises(TransportError):
        client.create_dataset("x", "1", "0")
    assert len(seen) == 1
    client, seen = _mock([_status(500, {"error": "InternalError", "detail": "after commit?"})])
    with pytest.raises(ServerError):
        client.create_dataset("x", "1", "0")
    assert len(seen) == 1

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client, seen = _mock([refused, _status(500, {"error": "InternalError", "detail": "x"})])
    with pytest.raises(ServerError):  # nothing was sent the first time: resent once
        client.create_dataset("x", "1", "0")
    assert len(seen) == 2


class LoseFirstResponse(httpx.BaseTransport):
    """Forwards to the real server, then pretends the first answer was lost in transit."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.calls = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        response = self.inner.handle_request(request)
        if self.calls == 1:
            response.read()
            response.close()
            raise httpx.ReadTimeout("answer lost after the server applied it", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncLoseFirstResponse(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        response = await self.inner.handle_async_request(request)
        if self.calls == 1:
            await response.aread()
            await response.aclose()
            raise httpx.ReadTimeout("answer lost after the server applied it", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_lost_answer_after_the_server_applied_it_has_exactly_one_effect(
    client: OdometerClient, server: Server
) -> None:
    ds = client.create_dataset("r-lost", "1", "0.000001")
    transport = LoseFirstResponse()
    with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY, transport=transport) as c:
        inv = c.register(ds, d.pure_dp("0.25"))
    assert transport.calls == 2
    entries = list(client.ledger(ds))
    assert [e.kind for e in entries] == ["dataset_created", "invocation_accepted"]
    assert entries[1].invocation_id == inv.id
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.25")

    reserved = client.register(ds, d.odp({"a": "0.1", "b": "0.3"}))
    transport = LoseFirstResponse()
    with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY, transport=transport) as c:
        done = c.settle(ds, reserved, "a")
    assert transport.calls == 2 and done.refund["epsilon"] == Decimal("0.2")
    assert [e.kind for e in client.ledger(ds)][-1] == "invocation_settled"
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.35")


def test_async_lost_answer_has_exactly_one_effect(client: OdometerClient, server: Server) -> None:
    ds = client.create_dataset("r-lost-async", "1", "0.000001")

    async def scenario() -> str:
        transport = AsyncLoseFirstResponse()
        async with AsyncOdometerClient(
            server.base_url, ADMIN_KEY, retry=FAST_RETRY, transport=transport
        ) as c:
            inv = await c.register(ds, d.pure_dp("0.5"))
        assert transport.calls == 2
        return inv.id

    inv_id = asyncio.run(scenario())
    kinds = [(e.kind, e.invocation_id) for e in client.ledger(ds)]
    assert kinds == [("dataset_created", None), ("invocation_accepted", inv_id)]
    assert client.get_dataset(ds).remaining_epsilon == Decimal("0.5")


def test_retry_policy_backoff_is_bounded() -> None:
    policy = RetryPolicy(retries=5, backoff=0.1, max_backoff=0.5)
    assert all(0 < policy.delay(n) <= 0.5 for n in range(10))


def test_a_duplicate_in_flight_is_retried_other_conflicts_are_not() -> None:
    client, seen = _mock(
        [
            _status(409, {"error": "IdempotencyConflict", "detail": "in flight"}),
            _status(201, CREATED),
        ]
    )
    assert client.register("ds_1", d.pure_dp("0.1")).id == "inv_1"
    assert len(seen) == 2 and len({r.headers["Idempotency-Key"] for r in seen}) == 1
    exceeded = {
        "error": "BudgetExceeded",
        "detail": "epsilon budget exceeded",
        "id": "inv_2",
        "requested": {"epsilon": "0.1", "delta": "0"},
        "remaining": {"epsilon": "0", "delta": "0"},
        "ledger_seq": 3,
    }
    client, seen = _mock([_status(409, exceeded)])
    with pytest.raises(BudgetExceeded) as exc:
        client.register("ds_1", d.pure_dp("0.1"), idempotency_key="mine")
    assert len(seen) == 1 and seen[0].headers["Idempotency-Key"] == "mine"
    assert exc.value.remaining_epsilon == Decimal(0) and exc.value.invocation_id == "inv_2"
