"""What the client refuses before sending, and what it leaves to the server.

The server is the judge of a request (a 422 naming the field and the rule): declarations,
accounting modes, partitions, names and times are sent as given. The client refuses only what
is its own to say: a budget's amounts outside their domain (ε in (0, 10⁶], δ in [0, 1), said
as the rule they break), a ``blocks`` selection of no known shape, a settlement with neither
cell nor output, and a blocks page size outside 1 … 1000."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from odometer_client import InvalidRequest, Mechanism, OdometerClient
from odometer_client import declarations as d

DATASET = {
    "id": "ds_1",
    "name": "x",
    "organisation": "org_1",
    "relation": "add_remove",
    "mode": "basic",
    "config": {},
    "status": {},
    "ledger": {"last_seq": 1, "head_hash": "h"},
}
EPSILON = '0 < ε ≤ 10⁶: an exact decimal, as a JSON number or as decimal text such as "1"'


@pytest.fixture
def sent() -> list[httpx.Request]:
    """The requests that reached the (canned) server."""
    return []


def _client(sent: list[httpx.Request]) -> OdometerClient:
    """A client of a canned server that answers every request with a 422, as the server answers
    a body it refuses."""

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        detail = "body.mechanism.svt.c: Input should be greater than or equal to 1"
        return httpx.Response(422, json={"error": "ValidationError", "detail": detail})

    return OdometerClient("http://odometer.invalid", "k", transport=httpx.MockTransport(answer))


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("epsilon", -1, "$.budget.epsilon: must be > 0, got -1"),
        ("epsilon", "-1", '$.budget.epsilon: must be > 0, got "-1"'),
        ("epsilon", 0, "$.budget.epsilon: must be > 0, got 0"),
        ("epsilon", "0.0", '$.budget.epsilon: must be > 0, got "0.0"'),
        ("epsilon", Decimal("-0.5"), '$.budget.epsilon: must be > 0, got "-0.5"'),
        ("epsilon", 2000000, "$.budget.epsilon: must be at most 1000000, got 2000000"),
        ("epsilon", "1e7", '$.budget.epsilon: must be at most 1000000, got "1e7"'),
        ("delta", "-0.1", '$.budget.delta: must be ≥ 0, got "-0.1"'),
        ("delta", 1, "$.budget.delta: must be < 1, got 1"),
        ("delta", "1.5", '$.budget.delta: must be < 1, got "1.5"'),
        ("epsilon", "1_0", f'$.budget.epsilon: "1_0" is not an amount ({EPSILON})'),
        ("epsilon", " 1", f'$.budget.epsilon: " 1" is not an amount ({EPSILON})'),
        ("epsilon", float("nan"), f"$.budget.epsilon: NaN is not an amount ({EPSILON})"),
        ("epsilon", True, f"$.budget.epsilon: true is not an amount ({EPSILON})"),
    ],
)
def test_a_budget_outside_its_domain_is_refused_before_sending(
    sent: list[httpx.Request], field: str, value: Any, problem: str
) -> None:
    budget: dict[str, Any] = {"epsilon": "1", "delta": "0", field: value}
    with _client(sent) as client, pytest.raises(InvalidRequest) as refused:
        client.create_dataset("x", budget["epsilon"], budget["delta"])
    assert refused.value.body == {
        "error": "ValidationError",
        "detail": f"refused before sending: {problem}",
        "client_side": True,
    }
    assert sent == []


def test_a_budget_change_and_a_cap_share_the_domain(sent: list[httpx.Request]) -> None:
    with _client(sent) as client:
        with pytest.raises(InvalidRequest, match=r"\$\.epsilon: must be > 0, got 0$"):
            client.change_budget("ds_1", 0, "0")
        with pytest.raises(InvalidRequest, match=r"\$\.delta: must be < 1, got \"1\"$"):
            client.set_organisation_cap("org_1", "10", "1")
    assert sent == []


@pytest.mark.parametrize(
    "blocks", [{"from": "2026-11-01"}, "some", {"keys": []}, {"ranges": []}, {"all": True}]
)
def test_a_selection_of_no_known_shape_is_refused_before_sending(
    sent: list[httpx.Request], blocks: Any
) -> None:
    with _client(sent) as client, pytest.raises(InvalidRequest) as refused:
        client.register("ds_1", d.pure_dp("0.1"), blocks=blocks)
    assert refused.value.body["client_side"] is True
    shown = json.dumps(blocks)
    assert refused.value.detail == (
        f"refused before sending: $.blocks: {shown} is not a selection of blocks: give "
        '{"from": KEY, "to": KEY}, {"keys": [KEY, …]}, {"ranges": [{"from", "to"}, …]} or "all"'
    )
    assert sent == []


@pytest.mark.parametrize(
    "blocks", ["all", {"from": 1, "to": 3}, {"keys": ["2026-11-01"]}, {"ranges": [{}]}]
)
def test_a_selection_of_a_known_shape_is_sent_as_given(
    sent: list[httpx.Request], blocks: Any
) -> None:
    with _client(sent) as client, pytest.raises(InvalidRequest):
        client.register("ds_1", d.pure_dp("0.1"), blocks=blocks)
    (request,) = sent
    assert json.loads(request.content)["blocks"] == blocks


def test_declarations_accounting_and_partitions_are_the_servers_to_judge(
    sent: list[httpx.Request],
) -> None:
    """A declaration the server refuses is sent, and its 422 is raised as it came: no copy of
    the server's rules in the client to drift from them."""
    svt = Mechanism(type="svt", epsilon1="1", epsilon2="1", c=0)  # built: the server judges
    assert svt.to_json() == {"type": "svt", "epsilon1": "1", "epsilon2": "1", "c": 0}
    with _client(sent) as client:
        for call in (
            lambda: client.register("ds_1", svt),
            lambda: client.register("ds_1", {"type": "pure_dp"}),
            lambda: client.preview("ds_1", {"type": "teleport"}),
            lambda: client.set_organisation_cap("org_1", "10", "1e-5", {"mode": "split"}),
            lambda: client.create_dataset("x", "1", "0", partition={"kind": "hour"}),
            lambda: client.organisation_cap_capacity("org_1", {"type": "gaussian"}),
        ):
            with pytest.raises(InvalidRequest) as refused:
                call()
            assert refused.value.status_code == 422 and "client_side" not in refused.value.body
    bodies = [json.loads(r.content) for r in sent]
    assert [b.get("mechanism", b.get("accounting", b.get("partition"))) for b in bodies] == [
        {"type": "svt", "epsilon1": "1", "epsilon2": "1", "c": 0},
        {"type": "pure_dp"},
        {"type": "teleport"},
        {"mode": "split"},
        {"kind": "hour"},
        {"type": "gaussian"},
    ]


def test_a_dataset_within_its_domain_is_sent(sent: list[httpx.Request]) -> None:
    def created(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(201, json=DATASET)

    transport = httpx.MockTransport(created)
    with OdometerClient("http://odometer.invalid", "k", transport=transport) as client:
        client.create_dataset("x", Decimal("1000000"), 0)
        client.create_dataset("x", "1e-300", "0.999")
    budgets = [json.loads(r.content)["budget"] for r in sent]
    assert budgets == [{"epsilon": "1000000", "delta": 0}, {"epsilon": "1e-300", "delta": "0.999"}]
