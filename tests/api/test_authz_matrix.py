"""The role/ownership matrix: every route × every kind of caller.

Routes are enumerated from the app, so a new route without a row here fails the test. For
each (route, caller) the expected outcome follows one rule, checked in this order:
no key / revoked key → 401; role not allowed on the route → 403; the object is invisible to
the caller (another organisation; for analysts an ungranted dataset or another analyst's
invocation) → 404; keys: only the owner, a curator of its organisation or an admin → else 403.
Every refusal must have that status and error code and change nothing in the database
(every table compared before/after); allowed calls must not be refused.

Shown able to fail: with the organisation check removed from the visibility rule
(``app.db.visibility.visible``; a cross-organisation leak), this test fails with 10 violations on
SQLite, e.g. "expected 404: DELETE /v1/datasets/{dataset_id}/grants/
{principal_id} as other_org: 200".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.db import models
from app.db.uow import UnitOfWork
from tests.support import AUTH, grant, new_organisation, new_principal

KINDS = (
    "owner_analyst",  # granted on the dataset, owns the invocation and the key
    "other_analyst",  # same organisation, no grant
    "other_org",  # a curator of another organisation
    "other_org_analyst",  # an analyst of another organisation
    "auditor",
    "curator",
    "admin",
    "revoked_key",
    "no_key",
)
ROLE = {
    "owner_analyst": "analyst",
    "other_analyst": "analyst",
    "other_org": "curator",
    "other_org_analyst": "analyst",
    "auditor": "auditor",
    "curator": "curator",
    "admin": "admin",
}
ALL = frozenset({"admin", "curator", "analyst", "auditor"})


@dataclass
class World:
    org: str
    dataset: str
    invocation: str
    other_analyst: str
    owner: str
    spare_key: str
    headers: dict[str, dict[str, str]]
    blocks: str = ""  # a partitioned dataset of the organisation, the owner granted


def build_world(client: TestClient) -> World:
    org, other = new_organisation(client), new_organisation(client)
    r = client.patch(
        f"/v1/organisations/{org}/cap", json={"epsilon": 50, "delta": "0.0001"}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    headers: dict[str, dict[str, str]] = {"admin": AUTH, "no_key": {}}
    ids: dict[str, str] = {}
    for kind in ("owner_analyst", "other_analyst", "auditor", "curator"):
        ids[kind], headers[kind] = new_principal(client, org, ROLE[kind])
    for kind in ("other_org", "other_org_analyst"):
        ids[kind], headers[kind] = new_principal(client, other, ROLE[kind])
    r = client.post(
        "/v1/datasets",
        json={"name": "matrix", "budget": {"epsilon": 10, "delta": "0.00001"}},
        headers=headers["curator"],
    )
    assert r.status_code == 201, r.text
    dataset = r.json()["id"]
    grant(client, dataset, ids["owner_analyst"])
    r = client.post(
        f"/v1/datasets/{dataset}/invocations",
        json={
            "mechanism": {
                "type": "odp",
                "delta": "0.000001",
                "cells": [{"name": "none", "epsilon": 0.1}, {"name": "some", "epsilon": 0.3}],
            }
        },
        headers=headers["owner_analyst"],
    )
    assert r.status_code == 201, r.text
    invocation = r.json()["id"]
    owner = ids["owner_analyst"]
    spare = client.post(f"/v1/principals/{owner}/keys", json={}, headers=AUTH).json()
    revoked = client.post(f"/v1/principals/{owner}/keys", json={}, headers=AUTH).json()
    assert client.delete(f"/v1/keys/{revoked['id']}", headers=AUTH).status_code == 200
    headers["revoked_key"] = {"Authorization": f"Bearer {revoked['key']}"}
    r = client.post(
        "/v1/datasets",
        json={
            "name": "matrix-days",
            "budget": {"epsilon": 10, "delta": "0.00001"},
            "partition": {"kind": "bucket", "unit": "person", "buckets": 1000},
        },
        headers=headers["curator"],
    )
    assert r.status_code == 201, r.text
    blocks = r.json()["id"]
    r = client.post(
        f"/v1/datasets/{blocks}/blocks",
        json={"open": {"from": 0, "to": 9}},
        headers=headers["curator"],
    )
    assert r.status_code == 200, r.text
    grant(client, blocks, owner)
    return World(
        org, dataset, invocation, ids["other_analyst"], owner, spare["id"], headers, blocks
    )


@dataclass(frozen=True)
class Row:
    """One route: the roles it admits, the object it addresses and how to call it."""

    roles: frozenset[str] | None  # None: public (no key needed)
    scope: str  # "none" | "org" | "dataset" | "invocation" | "key"
    path: Callable[[World], str]
    body: Callable[[World], Any] = lambda w: None
    mutating: bool = True


DS = "/v1/datasets/{}"
ROWS: dict[tuple[str, str], Row] = {
    ("POST", "/v1/organisations"): Row(
        frozenset({"admin"}),
        "none",
        lambda w: "/v1/organisations",
        lambda w: {"name": f"new-{w.dataset[-8:]}"},
    ),
    ("GET", "/v1/organisations"): Row(ALL, "none", lambda w: "/v1/organisations", mutating=False),
    ("PATCH", "/v1/organisations/{organisation_id}/cap"): Row(
        frozenset({"curator"}),
        "org",
        lambda w: f"/v1/organisations/{w.org}/cap",
        lambda w: {"epsilon": 40, "delta": "0.0001"},
    ),
    ("POST", "/v1/organisations/{organisation_id}/cap/capacity"): Row(
        ALL,
        "org",
        lambda w: f"/v1/organisations/{w.org}/cap/capacity",
        lambda w: {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}},
        mutating=False,
    ),
    ("GET", "/v1/organisations/{organisation_id}/report"): Row(
        frozenset({"curator", "auditor"}),
        "org",
        lambda w: f"/v1/organisations/{w.org}/report",
        mutating=False,
    ),
    ("POST", "/v1/principals"): Row(
        frozenset({"curator"}),
        "org",
        lambda w: "/v1/principals",
        lambda w: {"name": "new", "role": "analyst", "organisation_id": w.org},
    ),
    ("GET", "/v1/principals"): Row(ALL, "none", lambda w: "/v1/principals", mutating=False),
    ("GET", "/v1/me"): Row(ALL, "none", lambda w: "/v1/me", mutating=False),
    ("POST", "/v1/principals/{principal_id}/keys"): Row(
        frozenset({"curator"}),
        "org",
        lambda w: f"/v1/principals/{w.other_analyst}/keys",
        lambda w: {},
    ),
    ("DELETE", "/v1/keys/{key_id}"): Row(ALL, "key", lambda w: f"/v1/keys/{w.spare_key}"),
    ("POST", "/v1/datasets"): Row(
        frozenset({"curator"}),
        "org",
        lambda w: "/v1/datasets",
        lambda w: {"name": "n", "budget": {"epsilon": 1, "delta": 0}, "organisation_id": w.org},
    ),
    ("GET", "/v1/datasets"): Row(ALL, "none", lambda w: "/v1/datasets", mutating=False),
    ("GET", "/v1/datasets/{dataset_id}"): Row(
        ALL, "dataset", lambda w: DS.format(w.dataset), mutating=False
    ),
    ("PATCH", "/v1/datasets/{dataset_id}/budget"): Row(
        frozenset({"curator"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/budget",
        lambda w: {"epsilon": 9, "delta": "0.00001"},
    ),
    ("POST", "/v1/datasets/{dataset_id}/blocks"): Row(
        frozenset({"curator"}),
        "dataset",
        lambda w: DS.format(w.blocks) + "/blocks",
        lambda w: {"open": {"from": 10, "to": 19}},
    ),
    ("GET", "/v1/datasets/{dataset_id}/blocks"): Row(
        ALL, "dataset", lambda w: DS.format(w.blocks) + "/blocks", mutating=False
    ),
    ("POST", "/v1/datasets/{dataset_id}/grants"): Row(
        frozenset({"curator"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/grants",
        lambda w: {"principal_id": w.other_analyst},
    ),
    ("GET", "/v1/datasets/{dataset_id}/grants"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/grants",
        mutating=False,
    ),
    ("DELETE", "/v1/datasets/{dataset_id}/grants/{principal_id}"): Row(
        frozenset({"curator"}),
        "dataset",
        lambda w: DS.format(w.dataset) + f"/grants/{w.owner}",
    ),
    ("POST", "/v1/datasets/{dataset_id}/invocations"): Row(
        frozenset({"analyst"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/invocations",
        lambda w: {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}},
    ),
    ("POST", "/v1/datasets/{dataset_id}/invocations/preview"): Row(
        frozenset({"analyst"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/invocations/preview",
        lambda w: {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}},
        mutating=False,
    ),
    ("POST", "/v1/datasets/{dataset_id}/invocations/{invocation_id}/settle"): Row(
        frozenset({"analyst"}),
        "invocation",
        lambda w: DS.format(w.dataset) + f"/invocations/{w.invocation}/settle",
        lambda w: {"cell": "none"},
    ),
    ("POST", "/v1/datasets/{dataset_id}/invocations/{invocation_id}/cancel"): Row(
        frozenset({"analyst"}),
        "invocation",
        lambda w: DS.format(w.dataset) + f"/invocations/{w.invocation}/cancel",
    ),
    ("GET", "/v1/datasets/{dataset_id}/invocations/{invocation_id}"): Row(
        frozenset({"analyst", "auditor"}),
        "invocation",
        lambda w: DS.format(w.dataset) + f"/invocations/{w.invocation}",
        mutating=False,
    ),
    ("GET", "/v1/datasets/{dataset_id}/ledger"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/ledger",
        mutating=False,
    ),
    ("GET", "/v1/datasets/{dataset_id}/ledger/proof"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/ledger/proof?seq=1",
        mutating=False,
    ),
    ("GET", "/v1/datasets/{dataset_id}/ledger/consistency"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/ledger/consistency?from=1",
        mutating=False,
    ),
    ("GET", "/v1/datasets/{dataset_id}/ledger/checkpoint"): Row(
        ALL, "dataset", lambda w: DS.format(w.dataset) + "/ledger/checkpoint", mutating=False
    ),
    ("GET", "/v1/datasets/{dataset_id}/ledger/forks"): Row(
        ALL, "dataset", lambda w: DS.format(w.dataset) + "/ledger/forks", mutating=False
    ),
    ("GET", "/v1/ledger-heads"): Row(ALL, "none", lambda w: "/v1/ledger-heads", mutating=False),
    ("GET", "/v1/datasets/{dataset_id}/report"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/report",
        mutating=False,
    ),
    ("GET", "/v1/datasets/{dataset_id}/report/spend.svg"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/report/spend.svg",
        mutating=False,
    ),
    ("GET", "/v1/datasets/{dataset_id}/report/analysts.svg"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/report/analysts.svg",
        mutating=False,
    ),
    ("GET", "/v1/checkpoint-key"): Row(ALL, "none", lambda w: "/v1/checkpoint-key", mutating=False),
    ("GET", "/v1/datasets/{dataset_id}/checkpoints"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/checkpoints",
        mutating=False,
    ),
    ("POST", "/v1/datasets/{dataset_id}/checkpoints"): Row(
        frozenset({"curator", "auditor"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/checkpoints",
    ),
    ("GET", "/v1/witness"): Row(
        frozenset({"admin"}), "none", lambda w: "/v1/witness", mutating=False
    ),
    ("POST", "/v1/witness/check"): Row(
        frozenset({"admin"}), "none", lambda w: "/v1/witness/check", lambda w: {}
    ),
    ("POST", "/v1/datasets/{dataset_id}/witness/import"): Row(
        frozenset({"admin"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/witness/import",
        lambda w: {"entries": []},
    ),
    ("POST", "/v1/datasets/{dataset_id}/witness/acknowledge"): Row(
        frozenset({"admin"}),
        "dataset",
        lambda w: DS.format(w.dataset) + "/witness/acknowledge",
        lambda w: {"reason": "the matrix"},
    ),
    ("GET", "/healthz"): Row(None, "none", lambda w: "/healthz", mutating=False),
    ("GET", "/readyz"): Row(None, "none", lambda w: "/readyz", mutating=False),
    ("GET", "/metrics"): Row(None, "none", lambda w: "/metrics", mutating=False),
}

#: Who sees an object of the first organisation (the admin sees everything).
VISIBLE = {
    "org": {"owner_analyst", "other_analyst", "auditor", "curator"},
    "key": {"owner_analyst", "other_analyst", "auditor", "curator"},
    "dataset": {"owner_analyst", "auditor", "curator"},  # analysts: only where granted
    "invocation": {"owner_analyst", "auditor", "curator"},  # analysts: only their own
}


def expected(row: Row, kind: str) -> int | None:
    """The refusal status for ``kind`` on ``row`` (None: allowed)."""
    if row.roles is None:
        return None
    if kind in ("no_key", "revoked_key"):
        return 401
    role = ROLE[kind]
    if role != "admin" and role not in row.roles:
        return 403
    if row.scope != "none" and kind != "admin" and kind not in VISIBLE[row.scope]:
        return 404
    if row.scope == "key" and kind not in ("owner_analyst", "curator", "admin"):
        return 403
    return None


def app_routes(client: TestClient) -> set[tuple[str, str]]:
    """Every (method, path) the app serves, from its own OpenAPI document."""
    paths: dict[str, dict[str, Any]] = client.app.openapi()["paths"]  # type: ignore[attr-defined]
    return {(method.upper(), path) for path, ops in paths.items() for method in ops}


def snapshot(uow: UnitOfWork) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table that a call could change (sorted, comparable)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with uow.read_only():
        s = uow.session
        out["datasets"] = sorted(
            (d.id, repr(d.state_json), repr(d.config_json), d.last_seq, d.head_hash)
            for d in s.scalars(select(models.Dataset))
        )
        out["ledger"] = sorted((e.dataset_id, e.seq) for e in s.scalars(select(models.LedgerEntry)))
        out["invocations"] = sorted((i.id, i.status) for i in s.scalars(select(models.Invocation)))
        out["organisations"] = sorted(
            (o.id, repr(o.cap_json), repr(o.cap_state_json))
            for o in s.scalars(select(models.Organisation))
        )
        out["principals"] = sorted((p.id, p.role) for p in s.scalars(select(models.Principal)))
        out["keys"] = sorted((k.id, k.revoked_at or "") for k in s.scalars(select(models.ApiKey)))
        out["grants"] = sorted(
            (g.dataset_id, g.principal_id, repr(g.quota_state_json))
            for g in s.scalars(select(models.Grant))
        )
        out["block_runs"] = sorted(
            (b.dataset_id, b.lo, b.hi, repr(b.state_json))
            for b in s.scalars(select(models.BlockRun))
        )
        out["idempotency"] = sorted(
            (r.principal_id, r.key) for r in s.scalars(select(models.IdempotencyRecord))
        )
    return out


def test_every_route_has_a_matrix_row(client: TestClient) -> None:
    assert app_routes(client) == set(ROWS), "add the new route to ROWS"


def test_role_ownership_matrix(client: TestClient, uow: UnitOfWork) -> None:
    shared = build_world(client)
    refused = allowed = 0
    failures: list[str] = []
    for (method, template), row in sorted(ROWS.items()):
        for kind in KINDS:
            want = expected(row, kind)
            world = shared if want is not None or not row.mutating else build_world(client)
            before = snapshot(uow) if want is not None else None
            body = row.body(world)
            r = client.request(
                method,
                row.path(world),
                headers=world.headers[kind],
                **({"json": body} if body is not None else {}),
            )
            where = f"{method} {template} as {kind}: {r.status_code} {r.text[:200]}"
            if r.status_code >= 500:
                failures.append(f"5xx: {where}")
            elif want is None:
                allowed += 1
                if r.status_code in (401, 403, 404):
                    failures.append(f"wrongly refused: {where}")
            else:
                refused += 1
                code = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound"}[want]
                if r.status_code != want or r.json().get("error") != code:
                    failures.append(f"expected {want}: {where}")
                elif snapshot(uow) != before:
                    failures.append(f"refused but changed something: {where}")
    assert failures == []
    print(f"\nmatrix: {refused} refusals and {allowed} allowed calls checked")
    assert refused > 100


def test_lists_are_scoped(client: TestClient) -> None:
    world = build_world(client)

    def dataset_ids(kind: str) -> set[str]:
        r = client.get("/v1/datasets", params={"limit": 1000}, headers=world.headers[kind])
        return {d["id"] for d in r.json()["datasets"]}

    assert world.dataset in dataset_ids("owner_analyst")
    assert world.dataset in dataset_ids("auditor")
    assert world.dataset not in dataset_ids("other_analyst")
    assert world.dataset not in dataset_ids("other_org")
    orgs = client.get("/v1/organisations", headers=world.headers["other_org"]).json()
    assert world.org not in {o["id"] for o in orgs["organisations"]}
    assert len(orgs["organisations"]) == 1
    people = client.get("/v1/principals", headers=world.headers["other_org"]).json()
    assert world.owner not in {p["id"] for p in people["principals"]}
    # a curator cannot create curators or admins
    r = client.post(
        "/v1/principals",
        json={"name": "boss", "role": "curator"},
        headers=world.headers["curator"],
    )
    assert (r.status_code, r.json()["error"]) == (403, "Forbidden")
