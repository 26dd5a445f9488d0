"""The dataset report (``GET …/report``), its SVG charts and the dashboard's static page.

One known scenario on a basic dataset (ε = 1, δ = 10⁻⁶), three analysts:

- Ann: pure ε 0.1 accepted; ODP cells {none 0.05, some 0.25} δ 10⁻⁷ reserved at 0.25 and
  settled to ``none`` (refund ε 0.2: an ODP saving). Net ε 0.15, δ 10⁻⁷.
- Bob (quota ε 0.6): pure ε 0.2 and 0.3 accepted; pure ε 0.2 refused by his quota.
- Cid: ODP cells {a 0.1, b 0.15} reserved and cancelled (refund ε 0.15, not a saving), then
  pure ε 0.5 refused by the dataset (0.65 + 0.5 > 1).

Every figure below is exact and was worked out by hand from those amounts.
"""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import dashboard, reports_svg
from app.db.repositories import LedgerRepository
from app.db.uow import UnitOfWork
from app.services import reports as service
from app.services.principals import admin_principal
from tests.support import (
    ADMIN_KEY,
    AUTH,
    basic_dataset,
    grant,
    ledger,
    new_organisation,
    new_principal,
)

SVG = "{http://www.w3.org/2000/svg}"
ANN = "<script>alert('ann')</script> & co"
BOB = 'Bob "<b>bold</b>"'


def _invoke(client: TestClient, ds: str, headers: dict[str, str], mechanism: Any) -> Any:
    return client.post(
        f"/v1/datasets/{ds}/invocations", json={"mechanism": mechanism}, headers=headers
    )


def _odp(delta: str, **cells: str) -> dict[str, Any]:
    return {
        "type": "odp",
        "delta": delta,
        "cells": [{"name": n, "epsilon": e} for n, e in cells.items()],
    }


def pure(epsilon: str) -> dict[str, Any]:
    return {"type": "pure_dp", "epsilon": epsilon}


def _scenario(client: TestClient) -> tuple[str, dict[str, str], dict[str, str]]:
    """The module docstring's scenario; returns (dataset id, analyst ids, auditor headers);
    the analysts' ids are keyed ``ann``, ``bob``, ``cid`` and their organisation ``org``."""
    org = new_organisation(client)
    r = client.post(
        "/v1/datasets",
        json={
            "name": "report <demo>",
            "budget": {"epsilon": 1, "delta": "0.000001"},
            "organisation_id": org,
        },
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    ids, keys = {}, {}
    for who, name in (("ann", ANN), ("bob", BOB), ("cid", "cid")):
        ids[who], keys[who] = new_principal(client, org, "analyst", name=name)
    grant(client, ds, ids["ann"])
    grant(client, ds, ids["bob"], quota={"epsilon": "0.6", "delta": "0.000001"})
    grant(client, ds, ids["cid"])
    _, auditor = new_principal(client, org, "auditor")
    ids["org"] = org
    assert _invoke(client, ds, keys["ann"], pure("0.1")).status_code == 201
    inv = _invoke(client, ds, keys["ann"], _odp("0.0000001", none="0.05", some="0.25")).json()
    r = client.post(
        f"/v1/datasets/{ds}/invocations/{inv['id']}/settle",
        json={"cell": "none"},
        headers=keys["ann"],
    )
    assert r.json()["refund"] == {"epsilon": "0.2", "delta": "0"}
    assert _invoke(client, ds, keys["bob"], pure("0.2")).status_code == 201
    assert _invoke(client, ds, keys["bob"], pure("0.3")).status_code == 201
    assert _invoke(client, ds, keys["bob"], pure("0.2")).json()["level"] == "quota"
    inv = _invoke(client, ds, keys["cid"], _odp("0", a="0.1", b="0.15")).json()
    r = client.post(f"/v1/datasets/{ds}/invocations/{inv['id']}/cancel", headers=keys["cid"])
    assert r.status_code == 200, r.text
    assert _invoke(client, ds, keys["cid"], pure("0.5")).json()["level"] == "dataset"
    return ds, ids, auditor


def test_report_of_a_known_scenario(client: TestClient) -> None:
    ds, ids, auditor = _scenario(client)
    r = client.get(f"/v1/datasets/{ds}/report", headers=auditor)
    assert r.status_code == 200, r.text
    report = r.json()
    entries = ledger(client, ds)
    assert len(entries) == 13  # created, 3 grants, 9 decisions
    assert report["guarantee"] == {
        "mode": "basic",
        "relation": "add_remove",
        "budget": {"epsilon": "1", "delta": "0.000001"},
        "config": entries[0]["config"],
        "certified": True,
    }
    assert report["status"]["spent"] == {"epsilon": "0.65", "delta": "0.0000001"}
    assert report["status"]["remaining"] == {"epsilon": "0.35", "delta": "0.0000009"}
    by_actor = {a["actor"]: a for a in report["analysts"]}
    assert by_actor[ids["ann"]] == {
        "actor": ids["ann"],
        "name": ANN,
        "charged": {"epsilon": "0.15", "delta": "0.0000001"},
        "refunded": {"epsilon": "0.2", "delta": "0"},
        # in basic an attribution is the net charge itself (ε and δ add)
        "attribution": {"epsilon": "0.15", "delta": "0.0000001", "certified": False},
        "curve": None,
        "accepted": 1,
        "reserved": 1,
        "rejected": 0,
        "settled": 1,
        "cancelled": 0,
        "curve_charges": 0,
    }
    bob, cid = by_actor[ids["bob"]], by_actor[ids["cid"]]
    assert (bob["charged"], bob["refunded"], bob["accepted"], bob["rejected"]) == (
        {"epsilon": "0.5", "delta": "0"},
        {},
        2,
        1,
    )
    assert (cid["charged"], cid["refunded"], cid["cancelled"], cid["rejected"]) == (
        {"epsilon": "0", "delta": "0"},
        {"epsilon": "0.15", "delta": "0"},
        1,
        1,
    )
    assert sum(Decimal(a["charged"]["epsilon"]) for a in report["analysts"]) == Decimal("0.65")
    # per declaration kind: pure ε 0.1 + 0.2 + 0.3 accepted, two refused; ODP reserved 0.25
    # (δ 10⁻⁷) settled to 0.05 and 0.15 cancelled: net ε 0.05, refunds 0.2 + 0.15
    assert report["mechanisms"] == [
        {
            "kind": "odp",
            "charged": {"epsilon": "0.05", "delta": "0.0000001"},
            "refunded": {"epsilon": "0.35", "delta": "0"},
            "attribution": {"epsilon": "0.05", "delta": "0.0000001", "certified": False},
            "curve": None,
            "accepted": 0,
            "reserved": 2,
            "rejected": 0,
            "settled": 1,
            "cancelled": 1,
        },
        {
            "kind": "pure_dp",
            "charged": {"epsilon": "0.6", "delta": "0"},
            "refunded": {},
            "attribution": {"epsilon": "0.6", "delta": "0", "certified": False},
            "curve": None,
            "accepted": 3,
            "reserved": 0,
            "rejected": 2,
            "settled": 0,
            "cancelled": 0,
        },
    ]
    assert sum(Decimal(m["charged"]["epsilon"]) for m in report["mechanisms"]) == Decimal("0.65")
    assert report["refunds"] == {
        "total": {"epsilon": "0.35", "delta": "0"},
        "odp_savings": {"epsilon": "0.2", "delta": "0"},
    }
    assert report["rejections"] == {
        "total": 2,
        "by_level": {"dataset": 1, "quota": 1},
        "by_reason": {"quota level: epsilon budget exceeded": 1, "epsilon budget exceeded": 1},
    }
    assert report["chain_head"] == {"seq": 13, "hash": entries[-1]["hash"]}
    assert report["verification"] == {
        "ok": True,
        "entries": 13,
        "head_hash": entries[-1]["hash"],
        "first_problem": None,
        "problem_count": 0,
        "problems": [],
    }
    series = report["series"]
    assert (series["unit"], series["stride"]) == ("epsilon", 1)
    spent = [(p["seq"], p["spent"], p["spent_delta"]) for p in series["points"]]
    # spent counts open reservations: 0.1, +0.25 reserved (δ charged), settled to 0.05, …
    assert spent == [
        (1, "0", "0"),
        (2, "0", "0"),
        (3, "0", "0"),
        (4, "0", "0"),
        (5, "0.1", "0"),
        (6, "0.35", "0.0000001"),
        (7, "0.15", "0.0000001"),
        (8, "0.35", "0.0000001"),
        (9, "0.65", "0.0000001"),
        (10, "0.65", "0.0000001"),
        (11, "0.8", "0.0000001"),
        (12, "0.65", "0.0000001"),
        (13, "0.65", "0.0000001"),
    ]
    assert {p["budget"] for p in series["points"]} == {"1"}
    assert [p["at"] for p in series["points"]] == [e["at"] for e in entries]


def test_series_is_downsampled_and_batches_are_bounded(
    client: TestClient, uow: UnitOfWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory must not grow with the ledger: it is read a batch at a time.

    Shown able to fail: with ``_batches`` reading ``limit=head`` (the whole ledger at once),
    this test failed with ``assert [10] == [3, 3, 3, 3]``."""
    ds = basic_dataset(client, epsilon=10)["id"]
    for eps in ("0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"):
        r = _invoke(client, ds, AUTH, {"type": "pure_dp", "epsilon": eps})
        assert r.status_code == 201
    whole = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()
    limits: list[int] = []
    page = LedgerRepository.page

    def spy(self: LedgerRepository, dataset_id: str, **kwargs: Any) -> Any:
        limits.append(kwargs["limit"])
        return page(self, dataset_id, **kwargs)

    monkeypatch.setattr(LedgerRepository, "page", spy)
    monkeypatch.setattr(service, "BATCH_SIZE", 3)
    monkeypatch.setattr(service, "MAX_POINTS", 4)
    admin = admin_principal(ADMIN_KEY, ADMIN_KEY)
    assert admin is not None
    small = service.dataset_report(uow, admin, ds)
    assert limits == [3, 3, 3, 3]  # 10 entries read 3 at a time: never more in memory
    # 10 entries, stride ceil(10/4) = 3: the last entry of each bucket, and the head
    assert small["series"]["stride"] == 3
    points = [(p["seq"], p["spent"]) for p in small["series"]["points"]]
    assert points == [(3, "0.3"), (6, "1.5"), (9, "3.6"), (10, "4.5")]
    assert len(points) <= 4
    # everything but the series is the same as the report read in one batch
    for key in ("analysts", "refunds", "rejections", "chain_head", "verification", "ledger"):
        assert small[key] == whole[key], key
    assert whole["series"]["points"][-1] == small["series"]["points"][-1]


def test_a_tampered_dataset_state_fails_the_verdict(client: TestClient, uow: UnitOfWork) -> None:
    """The stored state is the one thing an attacker can change without fighting the ledger's
    append-only triggers; the report must notice.

    Shown able to fail: with the stored-state comparison removed from
    ``app.services.reports._verdict``, this test failed with ``assert True is False`` on the
    first verdict (the tampered report still said ok)."""
    ds, _, auditor = _scenario(client)
    with uow:
        row = uow.datasets.get(ds)
        assert row is not None
        original = (dict(row.state_json), row.head_hash)
    try:
        _tamper_and_check(client, uow, ds, auditor)
    finally:  # the database is shared with later tests, which list every dataset
        with uow:
            row = uow.datasets.get(ds)
            assert row is not None
            row.state_json, row.head_hash = original
            uow.commit()


def _tamper_and_check(
    client: TestClient, uow: UnitOfWork, ds: str, auditor: dict[str, str]
) -> None:
    with uow:
        row = uow.datasets.get(ds)
        assert row is not None
        row.state_json = {**row.state_json, "spent_epsilon": "0.05"}  # hides 0.6 of spend
        uow.commit()
    report = client.get(f"/v1/datasets/{ds}/report", headers=auditor).json()
    assert report["verification"]["ok"] is False
    assert report["verification"]["first_problem"] == (
        "the dataset's stored state differs from the replayed state"
    )
    assert report["status"]["spent"]["epsilon"] == "0.05"  # what the tampered row claims
    with uow:
        row = uow.datasets.get(ds)
        assert row is not None
        row.head_hash = "0" * 64
        uow.commit()
    verdict = client.get(f"/v1/datasets/{ds}/report", headers=auditor).json()["verification"]
    assert verdict["ok"] is False and verdict["problem_count"] == 2
    assert "the dataset's head hash differs from the last entry's hash" in verdict["problems"]
    with uow:
        row = uow.datasets.get(ds)
        assert row is not None
        row.state_json = {"garbage": "1"}
        uow.commit()
    r = client.get(f"/v1/datasets/{ds}/report", headers=auditor)
    assert r.status_code == 200, r.text  # an unreadable row is a failed verdict, not a 500
    assert r.json()["status"] is None
    assert r.json()["guarantee"]["budget"] == {"epsilon": "1", "delta": "0.000001"}
    verdict = r.json()["verification"]
    assert verdict["ok"] is False and service.UNREADABLE in verdict["problems"]
    assert client.get(f"/v1/datasets/{ds}/report/spend.svg", headers=auditor).status_code == 200


def test_svg_charts_are_well_formed_and_escape_names(client: TestClient) -> None:
    """Analyst names are user-controlled and the dashboard inlines these documents.

    Shown able to fail: with ``app.reports_svg.text`` returning its input unescaped, this
    test failed in ``ET.fromstring`` with ``mismatched tag: line 3, column 66`` (the spend
    chart's title, which carries the dataset name ``report <demo>``)."""
    ds, _, auditor = _scenario(client)
    base = f"/v1/datasets/{ds}/report"
    spend = client.get(f"{base}/spend.svg", headers=auditor)
    assert spend.status_code == 200
    assert spend.headers["content-type"] == "image/svg+xml"
    assert "default-src 'none'" in spend.headers["content-security-policy"]
    root = ET.fromstring(spend.text)
    assert root.tag == f"{SVG}svg"
    assert root.findtext(f"{SVG}title") == "Spend vs budget (epsilon) of dataset report <demo>"
    polylines = {p.get("class"): p.get("points", "") for p in root.iter(f"{SVG}polyline")}
    assert set(polylines) == {"spent", "committed", "budget"}
    # a step line: a start, two vertices per point, and the head's value held one stride on
    assert len(polylines["spent"].split()) == 1 + 2 * 13 + 1
    assert len({pt.split(",")[1] for pt in polylines["budget"].split()}) == 1  # horizontal
    assert "spent 0.65 of 1 epsilon" in (root.findtext(f"{SVG}desc") or "")

    analysts = client.get(f"{base}/analysts.svg", headers=auditor)
    assert analysts.status_code == 200
    assert "<script" not in analysts.text and "<b>" not in analysts.text
    root = ET.fromstring(analysts.text)
    assert root.findtext(f"{SVG}title") == "Spend per analyst (epsilon) of dataset report <demo>"
    labels = [t.text for g in root.iter(f"{SVG}g") for t in g.findall(f"{SVG}text")]
    assert ANN[:27] + "…" in labels and BOB in labels and "cid" in labels
    bars = [g for g in root.iter(f"{SVG}g") if g.get("class") == "analyst"]
    assert [g.findtext(f"{SVG}text[2]") for g in bars] == [
        "net 0.5, refunded 0",
        "net 0.15, refunded 0.2",
        "net 0, refunded 0.15",
    ]


def test_report_refusals_change_nothing(client: TestClient) -> None:
    ds, ids, _ = _scenario(client)
    analyst_id, analyst = new_principal(client, ids["org"], "analyst")
    grant(client, ds, analyst_id)  # granted, but reports are for auditors
    before = ledger(client, ds)
    for suffix in ("", "/spend.svg", "/analysts.svg"):
        url = f"/v1/datasets/{ds}/report{suffix}"
        assert client.get(url).status_code == 401
        r = client.get(f"/v1/datasets/ds_missing/report{suffix}", headers=AUTH)
        assert (r.status_code, r.json()["error"]) == (404, "NotFound")
        _, other_auditor = new_principal(client, new_organisation(client), "auditor")
        r = client.get(url, headers=other_auditor)
        assert (r.status_code, r.json()["error"]) == (404, "NotFound")
        r = client.get(url, headers=analyst)
        assert (r.status_code, r.json()["error"]) == (403, "Forbidden")
    assert ledger(client, ds) == before


def test_dashboard_is_static_with_a_strict_policy(client: TestClient) -> None:
    page = client.get("/dashboard")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy
    # no inline script: every script element loads a same-origin file
    html = page.text
    assert html.count("<script") == html.count('<script src="/dashboard/app.js"') == 1
    # app.js and every module it imports: served as scripts, none writing HTML as text
    modules = sorted(p.name for p in Path(dashboard.__file__).parent.glob("*.js"))
    assert "app.js" in modules and len(modules) > 1
    texts = []
    for name in modules:
        js = client.get(f"/dashboard/{name}")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        texts.append(js.text)
    assert not any("innerHTML" in text for text in texts)
    assert any("sessionStorage" in text for text in texts)
    assert client.get("/dashboard/style.css").headers["content-type"].startswith("text/css")
    for name in ("secret.py", "..%2F__init__.py", "index.htm"):
        r = client.get(f"/dashboard/{name}")
        assert (r.status_code, r.json()["error"]) == (404, "NotFound")


def test_other_modes_report_in_their_own_units(client: TestClient) -> None:
    gaussian = {"type": "gaussian", "sigma": "20", "sensitivity": 1}
    zcdp = basic_dataset(client, accounting={"mode": "zcdp"})["id"]
    assert _invoke(client, zcdp, AUTH, gaussian).status_code == 201
    report = client.get(f"/v1/datasets/{zcdp}/report", headers=AUTH).json()
    # ρ = Δ² / (2σ²) = 1 / 800, exactly
    assert report["series"]["unit"] == "rho" and report["guarantee"]["certified"] is True
    assert report["series"]["points"][-1]["spent"] == "0.00125"
    assert report["series"]["points"][-1]["budget"] == report["status"]["rho_budget"]
    assert report["analysts"][0]["charged"] == {"rho": "0.00125", "delta": "0"}
    assert report["verification"]["ok"] is True

    rdp = basic_dataset(client, accounting={"mode": "rdp"})["id"]
    assert _invoke(client, rdp, AUTH, gaussian).status_code == 201
    report = client.get(f"/v1/datasets/{rdp}/report", headers=AUTH).json()
    assert report["series"]["unit"] == "epsilon" and report["guarantee"]["certified"] is False
    assert (
        report["series"]["points"][-1]["spent"] == (report["status"]["spent_eps_delta"]["epsilon"])
    )
    (admin,) = report["analysts"]
    assert (admin["curve_charges"], admin["charged"]) == (1, {"delta": "0"})
    assert report["verification"]["ok"] is True
    chart = client.get(f"/v1/datasets/{rdp}/report/spend.svg", headers=AUTH).text
    assert ET.fromstring(chart).tag == f"{SVG}svg"


def test_rejection_levels_are_the_409s_levels_when_several_levels_refuse(
    client: TestClient,
) -> None:
    """The dataset (ε = 1) and Dan's quota (ε 0.3) both refuse his ε 0.9 once ε 0.8 is spent
    (0.2 of it his):
    the 409 reports the first refusal in the order dataset, organisation, quota, and so must
    the report. The quota alone refuses ε 0.2 (0.2 + 0.2 > 0.3, 0.8 + 0.2 ≤ 1); the
    organisation cap (ε 1.5 over two datasets) alone refuses ε 0.9 on a second dataset (ε 2)
    once 0.8 + 0.2 is counted.

    Shown able to fail: with the report's old rule (an upper level's ``rejected`` part wins
    over the dataset's refusal), this test failed on the summed counts: the quota got 2, the
    dataset none (``{'organisation': 1, 'quota': 2} == {'dataset': 2, …}``)."""
    org = new_organisation(client)
    r = client.patch(
        f"/v1/organisations/{org}/cap",
        json={"epsilon": "1.5", "delta": "0.00001"},
        headers=AUTH,
    )
    assert r.status_code == 200, r.text
    ds = basic_dataset(client, organisation_id=org)["id"]
    other = basic_dataset(client, epsilon=2, organisation_id=org)["id"]
    dan, dan_key = new_principal(client, org, "analyst", name="Dan")
    grant(client, ds, dan, quota={"epsilon": "0.3", "delta": "0.000001"})
    grant(client, other, dan)
    assert _invoke(client, ds, AUTH, pure("0.6")).status_code == 201
    assert _invoke(client, ds, dan_key, pure("0.2")).status_code == 201
    levels: list[str] = []
    for dataset, mechanism in ((ds, pure("0.9")), (ds, pure("0.2")), (ds, pure("0.5"))):
        r = _invoke(client, dataset, dan_key, mechanism)
        assert r.status_code == 409, r.text
        levels.append(r.json()["level"])
    # ε 0.9: the dataset (0.8 + 0.9 > 1) and the quota (0.2 + 0.9 > 0.3) both refuse
    # ε 0.2: only the quota refuses; ε 0.5: the dataset and the quota both refuse
    assert levels == ["dataset", "quota", "dataset"]
    entries = ledger(client, ds)
    both = [e for e in entries if e["kind"] == "invocation_rejected"]
    assert [e["quota"]["outcome"] for e in both] == ["rejected"] * 3  # the quota refused all
    assert _invoke(client, other, AUTH, pure("0.2")).status_code == 201  # org: 0.8 + 0.2
    r = _invoke(client, other, dan_key, pure("0.9"))  # 1.1 ≤ 2 admitted; the cap: 1.9 > 1.5
    assert (r.status_code, r.json()["level"]) == (409, "organisation")
    levels.append(r.json()["level"])
    counts: dict[str, int] = {}
    for dataset in (ds, other):
        report = client.get(f"/v1/datasets/{dataset}/report", headers=AUTH).json()
        assert report["verification"]["ok"] is True
        for level, n in report["rejections"]["by_level"].items():
            counts[level] = counts.get(level, 0) + n
        assert sum(report["rejections"]["by_level"].values()) == report["rejections"]["total"]
    assert counts == {"dataset": 2, "organisation": 1, "quota": 1}
    assert counts == {level: levels.count(level) for level in set(levels)}
    for entry in both:
        assert service.rejection_level(entry) in ("dataset", "quota")


def test_a_curator_reads_its_own_organisations_reports_and_ledgers(client: TestClient) -> None:
    """Curators run their datasets: they read the report, its charts and the ledger of their
    organisation's datasets; another organisation's are invisible (404), as for auditors."""
    ds, ids, _ = _scenario(client)
    _, curator = new_principal(client, ids["org"], "curator")
    _, stranger = new_principal(client, new_organisation(client), "curator")
    before = ledger(client, ds)
    report = client.get(f"/v1/datasets/{ds}/report", headers=curator)
    assert report.status_code == 200, report.text
    assert report.json()["rejections"]["by_level"] == {"dataset": 1, "quota": 1}
    assert report.json()["chain_head"]["seq"] == len(before) == 13
    for suffix in ("/spend.svg", "/analysts.svg"):
        r = client.get(f"/v1/datasets/{ds}/report{suffix}", headers=curator)
        assert r.status_code == 200 and ET.fromstring(r.text).tag == f"{SVG}svg"
    r = client.get(f"/v1/datasets/{ds}/ledger", headers=curator)
    assert r.status_code == 200 and [e["seq"] for e in r.json()["entries"]] == list(range(1, 14))
    for suffix in ("/report", "/report/spend.svg", "/ledger"):
        r = client.get(f"/v1/datasets/{ds}{suffix}", headers=stranger)
        assert (r.status_code, r.json()["error"]) == (404, "NotFound")
    assert ledger(client, ds) == before


def test_report_series_separates_open_reservations(client: TestClient) -> None:
    """``spent`` counts open reservations (what is committed); ``reserved`` says how much of it
    is reserved, so spent − reserved is what was settled or accepted outright."""
    ds = basic_dataset(client)["id"]
    assert _invoke(client, ds, AUTH, pure("0.1")).status_code == 201
    inv = _invoke(client, ds, AUTH, _odp("0", none="0.05", some="0.25")).json()
    r = client.post(
        f"/v1/datasets/{ds}/invocations/{inv['id']}/settle", json={"cell": "some"}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    points = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()["series"]["points"]
    assert [(p["spent"], p["reserved"]) for p in points] == [
        ("0", "0"),
        ("0.1", "0"),
        ("0.35", "0.25"),
        ("0.35", "0"),
    ]


@pytest.mark.parametrize(
    ("exact", "up", "expected"),
    [
        ("0.21510012438242689937", True, "0.215101"),
        ("0.21510012438242689937", False, "0.2151"),
        ("0.78489987561757310063", False, "0.784899"),
        ("0.78489987561757310063", True, "0.7849"),
        ("1.09844507457322930014666666666666666666666666666666666666667", True, "1.09845"),
        ("999999.5", True, "1000000"),
        ("999999.5", False, "999999"),
        ("0.0000001234567", True, "0.000000123457"),
        ("1.2345678E-21", False, "1.23456e-21"),
        ("-0.1234567", True, "-0.123456"),
        ("-0.1234567", False, "-0.123457"),
        ("0.000001", False, "0.000001"),
        ("0", True, "0"),
        ("2.50", False, "2.5"),
    ],
)
def test_shown_amounts_round_in_the_direction_that_never_flatters(
    exact: str, up: bool, expected: str
) -> None:
    """At most 6 significant digits; spent rounds towards +∞, what remains towards −∞."""
    got = reports_svg.shown(exact, up=up)
    assert got == expected
    assert (Decimal(got) >= Decimal(exact)) if up else (Decimal(got) <= Decimal(exact))


def test_nice_ticks_are_4_to_6_round_steps_covering_the_top() -> None:
    for digits in ("1", "1.0001", "1.1", "2", "2.5", "2.6", "3", "4.9", "5", "5.01", "7.3", "9.99"):
        for power in range(-12, 7):
            top = Decimal(digits).scaleb(power)
            ticks = reports_svg.nice_ticks(top)
            step = ticks[1]
            mantissa = step.scaleb(-step.adjusted()).normalize()
            assert mantissa in {Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5)}, (top, step)
            assert 4 <= len(ticks) <= 6, (top, ticks)
            assert ticks[0] == 0 and ticks[-2] < top <= ticks[-1], (top, ticks)
            assert all(b - a == step for a, b in itertools.pairwise(ticks))


NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])", re.IGNORECASE)


def _labels_fit_and_amounts_are_short(root: ET.Element, chart: str) -> None:
    """Every ``<text>`` inside the picture (by the renderer's glyph width) and no printed
    amount with more than 8 significant digits."""
    width = float(root.get("width") or 0)
    for t in root.iter(f"{SVG}text"):
        label = t.text or ""
        size = float(t.get("font-size") or 12) / 12
        extent = reports_svg.CHAR_W * size * len(label)
        x = float(t.get("x") or 0)
        anchor = t.get("text-anchor") or "start"
        lo = x - extent if anchor == "end" else x - extent / 2 if anchor == "middle" else x
        assert lo >= 0 and lo + extent <= width, (chart, label, lo, extent)
        long = [
            n
            for n in NUMBER.findall(label)
            if len(n.split("e")[0].replace(".", "").lstrip("0")) > 8
        ]
        assert long == [], (chart, label)


def test_charts_keep_labels_inside_and_amounts_short(client: TestClient) -> None:
    """A zcdp dataset (its ρ budget has 20 significant digits), a long dataset name and long
    analyst names; a basic dataset whose amounts are tiny (ε ~10⁻⁷, the longest plain labels):
    every label fits in the picture, every printed amount has at most 8 significant digits,
    the value axis has 4 to 6 ticks, and the spend chart draws spent and spent + reserved as
    two series, labelled so.

    Shown able to fail: with the per-analyst value column at its old fixed 190 px, the tiny
    dataset's ``net 0.000000223457, refunded 0`` (210 px from x = 514) ran off the picture."""
    org = new_organisation(client)
    ds = basic_dataset(client, organisation_id=org, name="z" * 120, accounting={"mode": "zcdp"})[
        "id"
    ]
    tiny = basic_dataset(client, organisation_id=org, epsilon="0.00001")["id"]
    odp = _odp("0", a="0.00000012345678", b="0.000000223456789")
    for i, name in enumerate(("n" * 90, "bob", "Zoë")):
        pid, key = new_principal(client, org, "analyst", name=name)
        grant(client, ds, pid)
        grant(client, tiny, pid)
        # σ = 8, 9, 10: Σρ within ρ_B of (1, 1e-6) (σ = 7, 8, 9 overshoots it by 0.4 % since
        # the filter holds 0.9 of δ_c, its ladder the rest)
        mechanism = {"type": "gaussian", "sigma": str(8 + i), "sensitivity": 1}
        assert _invoke(client, ds, key, mechanism).status_code == 201
        inv = _invoke(client, tiny, key, odp).json()
        if i != 1:
            r = client.post(
                f"/v1/datasets/{tiny}/invocations/{inv['id']}/settle",
                json={"cell": "a"},
                headers=key,
            )
            assert r.status_code == 200, r.text
    for chart in ("spend", "analysts"):
        svg = client.get(f"/v1/datasets/{tiny}/report/{chart}.svg", headers=AUTH).text
        _labels_fit_and_amounts_are_short(ET.fromstring(svg), chart)
    report = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()
    assert len(report["status"]["rho_budget"].lstrip("0.")) > 8  # a long exact value
    for chart in ("spend", "analysts"):
        root = ET.fromstring(client.get(f"/v1/datasets/{ds}/report/{chart}.svg", headers=AUTH).text)
        _labels_fit_and_amounts_are_short(root, chart)
        if chart == "spend":
            assert 4 <= len([t for t in root.iter(f"{SVG}text") if t.get("class") == "ytick"]) <= 6
            legend = [g.findtext(f"{SVG}text") or "" for g in root.iter(f"{SVG}g")]
            budget = reports_svg.shown(report["status"]["rho_budget"], up=False)
            spent = reports_svg.shown(report["status"]["spent"]["rho"], up=True)
            assert legend == [
                f"spent {spent} ρ",
                f"spent + reserved {spent} ρ",
                f"budget {budget} ρ",
            ]
            classes = {p.get("class") for p in root.iter(f"{SVG}polyline")}
            assert classes == {"spent", "committed", "budget"}
