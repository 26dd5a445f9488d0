"""Every call of the client returns a type that says what it holds (grants, organisations,
principals, keys, the witness, the ledger and the report were plain dicts); the dicts' mapping
access still works for one minor version, with a ``DeprecationWarning`` each time, and reads
what the dict held (amounts as ``Decimal`` where they were)."""

from __future__ import annotations

import asyncio
import inspect
import secrets
import warnings
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from odometer_client import (
    AsyncOdometerClient,
    CapCapacity,
    DatasetDraw,
    FrozenDataset,
    Grant,
    GrantCreated,
    IssuedKey,
    LedgerEntry,
    Me,
    OdometerClient,
    Organisation,
    OrganisationReport,
    Principal,
    Report,
    RevokedKey,
    WitnessState,
)
from odometer_client import declarations as d
from odometer_client.models import decimals
from tests.client.live import ADMIN_KEY
from tests.client.test_contract import _declared, _reads, _schema

TYPED = [
    CapCapacity,
    DatasetDraw,
    FrozenDataset,
    Grant,
    GrantCreated,
    IssuedKey,
    LedgerEntry,
    Me,
    Organisation,
    OrganisationReport,
    Principal,
    Report,
    RevokedKey,
    WitnessState,
]


def _untyped(annotation: Any) -> bool:
    """A result that is (or holds) a bare ``dict``: what the calls returned before."""
    if annotation is dict or get_origin(annotation) is dict:
        return True
    return any(_untyped(arg) for arg in get_args(annotation))


@pytest.mark.parametrize("cls", [OdometerClient, AsyncOdometerClient])
def test_no_call_returns_a_dict(cls: type[Any]) -> None:
    calls = {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }
    assert {"grant", "organisations", "whoami", "issue_key", "witness", "ledger"} <= set(calls)
    untyped = {
        name
        for name, call in calls.items()
        if _untyped(get_type_hints(call).get("return", type(None)))
    }
    assert untyped == set()


@pytest.mark.parametrize("model", TYPED)
def test_typed_results_read_only_what_the_response_schemas_declare(model: Any) -> None:
    """As ``test_contract`` holds the older result types: what a type needs is required by its
    schema, and whatever it reads is declared there."""
    (name,) = model.SCHEMAS
    read, optional = _reads(model, name)
    required = set(_schema(name).get("required", ()))
    needed = {key for key in read if "." not in key}
    assert needed <= required, f"{model.__name__} needs {needed - required} from {name}"
    assert (read | optional) <= _declared(name), (read | optional) - _declared(name)


def _deprecated(action: Any) -> Any:
    deprecated = "mapping access to the client's results is deprecated"
    with pytest.warns(DeprecationWarning, match=deprecated) as caught:
        value = action()
    assert len(caught) == 1
    return value


def test_mapping_access_is_deprecated_and_reads_what_the_dict_held(
    client: OdometerClient,
) -> None:
    org = client.create_organisation(f"typed-{secrets.token_hex(4)}")
    assert isinstance(org, Organisation) and org.cap is None and org.closed == []
    capped = client.set_organisation_cap(org.id, "2", "1e-6")
    assert capped.cap == {"epsilon": Decimal(2), "delta": Decimal("0.000001"), "mode": "basic"}
    # every use of the mapping warns once and answers as the dict did
    assert _deprecated(lambda: capped["cap"]) == capped.cap
    assert _deprecated(lambda: capped.get("cap")) == capped.cap
    assert _deprecated(lambda: capped.get("absent", 7)) == 7
    assert _deprecated(lambda: "cap_seq" in capped) is True
    assert _deprecated(lambda: [key for key in capped]) == list(capped.raw)
    assert _deprecated(lambda: list(capped.keys())) == list(capped.raw)
    assert _deprecated(lambda: len(capped)) == len(capped.raw)
    assert _deprecated(lambda: dict(capped.items())) == decimals(capped.raw)
    assert _deprecated(lambda: list(capped.values())) == list(decimals(capped.raw).values())
    assert _deprecated(lambda: capped["spent"]) == {"epsilon": Decimal(0), "delta": Decimal(0)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert capped and capped.id == org.id  # true as every document was; no warning
        assert capped.raw["cap"] == {"epsilon": "2", "delta": "0.000001", "mode": "basic"}

    ds = client.create_dataset(f"typed-{secrets.token_hex(3)}", "1", "1e-6")
    name = f"typed-{secrets.token_hex(3)}"
    analyst = client.create_principal(name, "analyst", organisation_id=ds.organisation)
    assert isinstance(analyst, Principal) and analyst.role == "analyst"
    assert _deprecated(lambda: analyst["id"]) == analyst.id
    key = client.issue_key(analyst.id)
    assert isinstance(key, IssuedKey) and key.principal_id == analyst.id and key.expires_at is None
    assert key.key not in repr(key)  # never the key itself in a log line
    created = client.grant(ds, analyst.id, quota={"epsilon": "0.5", "delta": "1e-7"})
    assert isinstance(created, GrantCreated) and created.principal_id == analyst.id
    assert created.quota == {"epsilon": Decimal("0.5"), "delta": Decimal("1E-7")}
    # grant() returned the JSON as received, grants() and revoke_grant() with Decimal amounts
    assert _deprecated(lambda: created["quota"]) == created.raw["quota"]
    assert isinstance(created.raw["quota"]["epsilon"], str)
    (listed,) = client.grants(ds)
    assert type(listed) is Grant and listed.quota == created.quota
    assert _deprecated(lambda: listed["quota"]) == created.quota
    with OdometerClient(client.base_url, key.key) as ana:
        me = ana.whoami()
        assert isinstance(me, Me) and me.role == "analyst"
        assert [g["dataset_id"] for g in me.grants] == [ds.id]
        assert _deprecated(lambda: me["grants"])[0]["dataset_id"] == ds.id
        ana.register(ds, d.pure_dp("0.25"))
    revoked = client.revoke_grant(ds, analyst.id)
    assert type(revoked) is Grant and revoked.quota_state is not None
    assert revoked.quota_state["spent_epsilon"] == Decimal("0.25")
    assert revoked.raw["quota_state"]["spent_epsilon"] == "0.25"
    gone = client.revoke_key(key.id)
    assert isinstance(gone, RevokedKey) and gone.id == key.id and gone.revoked_at

    # the ledger's entries and the report: as the server wrote them, dicts as received
    entries = list(client.ledger(ds))
    assert all(isinstance(e, LedgerEntry) for e in entries)
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    (accepted,) = [e for e in entries if e.kind == "invocation_accepted"]
    assert accepted.actor == analyst.id and accepted.invocation_id is not None
    assert accepted.charge == accepted.raw["charge"] and accepted.hash == accepted.raw["hash"]
    assert _deprecated(lambda: accepted["charge"]) == accepted.raw["charge"]
    report = client.report(ds)
    assert isinstance(report, Report) and report.verified is True
    assert report.verification == report.raw["verification"]
    assert _deprecated(lambda: report["verification"]["ok"]) is True


def test_the_witness_and_an_organisations_report_are_typed(client: OdometerClient) -> None:
    state = client.witness()
    assert isinstance(state, WitnessState) and state.frozen == []
    assert _deprecated(lambda: state["enabled"]) is state.enabled
    org = client.create_organisation(f"typed-report-{secrets.token_hex(4)}")
    client.set_organisation_cap(org.id, "10", "1e-5", {"mode": "zcdp"})
    gaussian = d.gaussian("10", "1")
    capacity = client.organisation_cap_capacity(org.id, gaussian)
    assert isinstance(capacity, CapCapacity)
    # 340 Gaussians fit a zcdp cap of (10, 1e-5) under accounting 1.9.0 (the first declaration
    # shapes the ladder: level 1 at 0.5 of δ_c); 352 under 1.7.0-1.8.0 (0.85), 353 before (0.9)
    assert (capacity.mode, capacity.at_least, capacity.count) == ("zcdp", False, 340)
    report = client.organisation_report(org.id)
    assert isinstance(report, OrganisationReport) and report.verified is True
    assert isinstance(report.organisation, Organisation) and report.organisation.id == org.id
    assert report.datasets == [] and report.problems == [] and report.decisions == 0
    assert _deprecated(lambda: report["organisation"]["id"]) == org.id


def test_the_asynchronous_client_returns_the_same_types(client: OdometerClient) -> None:
    async def read() -> tuple[list[Organisation], list[LedgerEntry]]:
        async with AsyncOdometerClient(client.base_url, ADMIN_KEY) as c:
            ds = await c.create_dataset(f"typed-async-{secrets.token_hex(3)}", "1", "0")
            entries: AsyncIterator[LedgerEntry] = c.ledger(ds)
            return await c.organisations(), [e async for e in entries]

    orgs, entries = asyncio.run(read())
    assert orgs and all(isinstance(o, Organisation) for o in orgs)
    assert [e.kind for e in entries] == ["dataset_created"]
