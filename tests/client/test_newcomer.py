"""A newcomer's walk-through, scripted: a curator sets up a dataset in every accounting mode,
an analyst spends it until a refusal, an auditor reads the report, through the client and the
``odometer`` command line, against a real server. Each step asserts what a person reads: the
one reading to quote, what the refusal suggests (and that it is then admitted), per-analyst
attribution in the curve modes, and one line (never a traceback) for common mistakes."""

from __future__ import annotations

import secrets
from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.cli import main
from odometer_client import BudgetExceeded, OdometerClient
from odometer_core.accounting.summary import round_up
from tests.client.conftest import FAST_RETRY
from tests.client.live import ADMIN_KEY, Server

SPLIT = {
    "mode": "split",
    "sub_budgets": [
        {"name": "train", "budget": {"epsilon": 2, "delta": 1e-6}, "accounting": {"mode": "rdp"}},
        {"name": "stats", "budget": {"epsilon": 1, "delta": 0}},
    ],
}
MODES: list[tuple[dict[str, Any], dict[str, Any], str | None]] = [
    ({"mode": "basic"}, {"type": "laplace", "scale": "2.5", "sensitivity": 1}, None),
    ({"mode": "zcdp"}, {"type": "gaussian", "sigma": 8, "sensitivity": 1}, None),
    ({"mode": "rdp"}, {"type": "gaussian", "sigma": 8, "sensitivity": 1}, None),
    ({"mode": "gdp"}, {"type": "gaussian", "sigma": 8, "sensitivity": 1}, None),
    (SPLIT, {"type": "gaussian", "sigma": 8, "sensitivity": 1}, "train"),
]


def _key(admin: OdometerClient, org: str, role: str) -> tuple[str, str]:
    principal = admin.create_principal(f"{role}-{secrets.token_hex(3)}", role, organisation_id=org)
    return principal.id, admin.issue_key(principal.id).key


def _cli(
    server: Server, key: str, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    code = main(["--url", server.base_url, "--key", key, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("accounting", "mechanism", "sub_budget"), MODES)
def test_curator_analyst_auditor_in_every_mode(
    server: Server,
    capsys: pytest.CaptureFixture[str],
    accounting: dict[str, Any],
    mechanism: dict[str, Any],
    sub_budget: str | None,
) -> None:
    mode = accounting["mode"]
    with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as admin:
        org = admin.create_organisation(f"newcomer-{mode}-{secrets.token_hex(3)}").id
        _, curator_key = _key(admin, org, "curator")
    # the curator creates the dataset, an analyst and an auditor, and grants the analyst
    with OdometerClient(server.base_url, curator_key, retry=FAST_RETRY) as curator:
        assert curator.whoami().role == "curator"
        ds = curator.create_dataset(f"walk-{mode}", 3, "1e-6", accounting=accounting)
        analysts = [_key(curator, org, "analyst") for _ in range(2)]
        _, auditor_key = _key(curator, org, "auditor")
        for analyst_id, _ in analysts:
            curator.grant(ds.id, analyst_id)
    # two analysts spend, two to one, until the dataset refuses
    extra: dict[str, Any] = {"sub_budget": sub_budget} if sub_budget else {}
    refused: BudgetExceeded | None = None
    with (
        OdometerClient(server.base_url, analysts[0][1], retry=FAST_RETRY) as ann,
        OdometerClient(server.base_url, analysts[1][1], retry=FAST_RETRY) as bob,
    ):
        me = ann.whoami()
        assert me.role == "analyst" and [g["dataset_id"] for g in me.grants] == [ds.id]
        for turn in range(300):
            try:
                (bob if turn % 3 == 2 else ann).register(ds.id, mechanism, **extra)
            except BudgetExceeded as exc:
                refused = exc
                break
        assert refused is not None and refused.summary is not None
        assert refused.summary["level"] == "dataset"
        assert refused.summary["text"].startswith("refused by the dataset budget: ")
        # what the refusal suggests is admitted as it stands
        suggestion = refused.summary["instead"]
        assert suggestion is not None and suggestion["type"] == mechanism["type"]
        assert ann.register(ds.id, suggestion, **extra).status == "accepted"
        status = ann.get_dataset(ds.id).status
    summary = status["summary"]
    # the client reads amounts as Decimal
    assert Decimal(summary["guarantee"]["epsilon"]) == round_up(
        Decimal(status["odometer"]["epsilon"])
    )
    more = summary["more"]
    assert more is not None
    assert more["count"] == 0  # the suggestion was exactly what was left
    assert {k: str(v) for k, v in more["of"].items()} == suggestion
    # the command line leads with the same reading
    code, out, err = _cli(server, analysts[0][1], capsys, "datasets", "show", ds.id)
    assert code == 0, err
    assert summary["text"] in out
    assert "Traceback" not in out + err
    # the analyst's refused register on the command line: one line, the refusal's summary
    code, out, err = _cli(
        server,
        analysts[0][1],
        capsys,
        "register",
        ds.id,
        "--mechanism",
        _json(mechanism),
        *(["--sub-budget", sub_budget] if sub_budget else []),
    )
    assert code != 0 and "Traceback" not in out + err
    assert "refused by the dataset budget" in err
    # the auditor's report: per-analyst attribution, ann's more than bob's
    with OdometerClient(server.base_url, auditor_key, retry=FAST_RETRY) as auditor:
        report = auditor.report(ds.id)
    assert report is not None and report.status is not None
    rows = {row["actor"]: row for row in report.analysts}
    shares = {a: rows[a].get("attribution") for a, _ in analysts}
    assert all(share is not None for share in shares.values())
    ann_share, bob_share = (Decimal(s["epsilon"]) for s in shares.values() if s is not None)
    assert Decimal(0) < bob_share < ann_share
    assert all(s["certified"] is False for s in shares.values() if s is not None)
    code, out, err = _cli(server, auditor_key, capsys, "report", ds.id)
    assert code == 0, err
    assert report.status["summary"]["text"] in out
    if mode != "basic":  # per analyst and per declaration kind, labelled as attribution
        assert "per analyst, attribution (not certified)" in out
        assert "per declaration kind, attribution (not certified)" in out
        (kind,) = report.mechanisms
        kind_line = next(line for line in out.splitlines() if line.startswith(kind["kind"]))
        attribution = kind.get("attribution")
        assert attribution is not None
        assert str(attribution["epsilon"]) in kind_line
    assert "Traceback" not in out + err


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


#: Twenty mistakes people make with the HTTP API: each is a 4xx with a one-line ``detail``.
MISTAKES: list[tuple[str, str, dict[str, Any] | str | None, dict[str, str], int]] = [
    ("POST", "/v1/datasets", {"name": "x"}, {}, 422),
    ("POST", "/v1/datasets", {"name": "x", "budget": {"epsilon": -1, "delta": 0}}, {}, 422),
    ("POST", "/v1/datasets", {"name": "x", "budget": {"epsilon": "NaN", "delta": 0}}, {}, 422),
    ("POST", "/v1/datasets", {"name": "x", "budget": {"epsilon": 1, "delta": 2}}, {}, 422),
    (
        "POST",
        "/v1/datasets",
        {"name": "x", "budget": {"epsilon": 1, "delta": 0}, "accounting": {"mode": "rpd"}},
        {},
        422,
    ),
    ("POST", "/v1/datasets", "name=x", {"Content-Type": "text/plain"}, 415),
    ("POST", "/v1/datasets", "{not json", {"Content-Type": "application/json"}, 422),
    ("GET", "/v1/datasets/ds_missing", None, {}, 404),
    ("GET", "/v1/datasets/DATASET/ledger?limit=-1", None, {}, 422),
    ("GET", "/v1/datasets/DATASET/ledger?actor=nobody%20here", None, {}, 422),
    ("POST", "/v1/datasets/DATASET/invocations", {"mechanism": {"type": "gauss"}}, {}, 422),
    ("POST", "/v1/datasets/DATASET/invocations", {"mechanism": {"type": "gaussian"}}, {}, 422),
    (
        "POST",
        "/v1/datasets/DATASET/invocations",
        {"mechanism": {"type": "pure_dp", "epsilon": 1}, "sub_budget": "a"},
        {},
        422,
    ),
    ("POST", "/v1/datasets/DATASET/invocations", {"mechanism": {"type": "pure_dp"}}, {}, 422),
    ("POST", "/v1/datasets/DATASET/invocations/inv_nope/settle", {"cell": "a"}, {}, 404),
    ("POST", "/v1/datasets/DATASET/invocations/inv_nope/cancel", None, {}, 404),
    ("PATCH", "/v1/datasets/DATASET/budget", {"epsilon": 0.0001, "delta": 0}, {}, 409),
    ("POST", "/v1/datasets/DATASET/grants", {"principal_id": "prn_nobody"}, {}, 404),
    ("GET", "/v1/datasets/DATASET/report?from=2026-01-01", None, {}, 422),
    ("GET", "/v1/me", None, {"Authorization": "Bearer not-a-key"}, 401),
]


def test_twenty_common_api_mistakes_get_one_line_each(server: Server) -> None:
    with OdometerClient(server.base_url, ADMIN_KEY, retry=FAST_RETRY) as admin:
        ds = admin.create_dataset(f"mistakes-{secrets.token_hex(3)}", 1, 0)
        admin.register(ds.id, {"type": "pure_dp", "epsilon": "0.5"})
    auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=server.base_url) as http:
        for method, path, body, headers, expected in MISTAKES:
            kwargs: dict[str, Any] = {"headers": {**auth, **headers}}
            if isinstance(body, str):
                kwargs["content"] = body
            elif body is not None:
                kwargs["json"] = body
            r = http.request(method, path.replace("DATASET", ds.id), **kwargs)
            assert r.status_code == expected, (method, path, r.text)
            detail = r.json()["detail"]
            assert detail and "\n" not in detail and "Traceback" not in r.text, (path, detail)
