"""Budget gauges on ``/metrics`` for the datasets ``ODOMETER_METRICS_DATASETS`` lists, and the
Grafana dashboard that reads them (``docs/operations.md``, *Budget gauges*).

The gauges are the API's status, figure for figure (``float`` of the exact decimal text); a
dataset not listed has no series; a listed reference that names no dataset, or a name datasets
share, is counted instead of exported; a failing read leaves ``/metrics`` answering. Every
expression of ``docs/grafana/odometer.json`` names only metrics a live scrape declares.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from pydantic import ValidationError

from app.db.uow import Database
from app.main import create_app
from app.settings import MAX_METRICS_DATASETS, Settings
from tests.support import ADMIN_KEY, AUTH, ROOT, basic_dataset

DASHBOARD = ROOT / "docs" / "grafana" / "odometer.json"
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.2"}],
}
GAUSSIAN = {"type": "gaussian", "sigma": "30", "sensitivity": 1}
#: The per-dataset families and the status figure each one carries.
FIGURES = {
    "odometer_dataset_budget_epsilon": ("budget", "epsilon"),
    "odometer_dataset_budget_delta": ("budget", "delta"),
    "odometer_dataset_certified_epsilon": ("odometer", "epsilon"),
    "odometer_dataset_certified_delta": ("odometer", "delta"),
}


# ---------------------------------------------------------------------------- helpers
@contextmanager
def listing(settings: Settings, database: Database, refs: Sequence[str]) -> Iterator[TestClient]:
    """A client of an app whose ``ODOMETER_METRICS_DATASETS`` lists ``refs``."""
    listed = Settings(
        database_url=settings.database_url, admin_key=ADMIN_KEY, metrics_datasets=tuple(refs)
    )
    with TestClient(create_app(listed, database)) as client:
        yield client


def scrape(client: TestClient) -> dict[str, list[Sample]]:
    """``/metrics``, parsed: the samples of each family declared (a family may have none)."""
    r = client.get("/metrics")
    assert r.status_code == 200, r.text
    return {f.name: list(f.samples) for f in text_string_to_metric_families(r.text)}


def by_dataset(samples: list[Sample]) -> dict[str, float]:
    out = {s.labels["dataset_id"]: s.value for s in samples}
    assert len(out) == len(samples), "one series per dataset"
    return out


def one(families: dict[str, list[Sample]], name: str) -> float:
    (sample,) = families[name]
    return sample.value


def view(client: TestClient, dataset_id: str) -> dict[str, Any]:
    r = client.get(f"/v1/datasets/{dataset_id}", headers=AUTH)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def invoke(client: TestClient, dataset_id: str, mechanism: dict[str, Any], **extra: Any) -> None:
    r = client.post(
        f"/v1/datasets/{dataset_id}/invocations",
        json={"mechanism": mechanism, **extra},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


# ---------------------------------------------------------------------------- the gauges
def test_listed_datasets_export_the_apis_status(
    client: TestClient, settings: Settings, database: Database
) -> None:
    basic = basic_dataset(client, name=unique("basic"))["id"]
    invoke(client, basic, {"type": "pure_dp", "epsilon": "0.1"})
    invoke(client, basic, {"type": "pure_dp", "epsilon": "0.15"})
    invoke(client, basic, ODP)  # an open reservation
    zcdp_name = unique("zcdp")
    zcdp = basic_dataset(client, name=zcdp_name, accounting={"mode": "zcdp"})["id"]
    invoke(client, zcdp, GAUSSIAN)
    split = basic_dataset(
        client,
        name=unique("split"),
        accounting={
            "mode": "split",
            "sub_budgets": [
                {"name": "a", "budget": {"epsilon": "0.5", "delta": "0.0000001"}},
                {"name": "b", "budget": {"epsilon": "0.5", "delta": "0.0000001"}},
            ],
        },
    )["id"]
    invoke(client, split, ODP, sub_budget="a")
    invoke(client, split, ODP, sub_budget="b")
    partitioned = basic_dataset(
        client,
        name=unique("days"),
        partition={"kind": "day", "unit": "record", "timezone": "Europe/Paris"},
    )["id"]
    unlisted = basic_dataset(client, name=unique("unlisted"))["id"]
    invoke(client, unlisted, {"type": "pure_dp", "epsilon": "0.1"})
    # by id, by name, the same dataset twice, a name and an id that name nothing
    refs = [basic, zcdp_name, split, partitioned, zcdp, unique("nothing"), "ds_" + "0" * 32]
    with listing(settings, database, refs) as listed:
        families = scrape(listed)
        views = {ds: view(listed, ds) for ds in (basic, zcdp, split, partitioned)}
    for name, (part, figure) in FIGURES.items():
        assert by_dataset(families[name]) == {
            ds: float(v["status"][part][figure]) for ds, v in views.items()
        }, name
    assert by_dataset(families["odometer_dataset_ledger_seq"]) == {
        ds: v["ledger"]["last_seq"] for ds, v in views.items()
    }
    # the certified readings moved: the figures are not the budgets' alone
    assert by_dataset(families["odometer_dataset_certified_epsilon"])[basic] == float("0.45")
    assert by_dataset(families["odometer_dataset_ledger_seq"])[basic] == 4
    # open reservations: basic and split datasets (over the sub-budgets); not the curve modes
    assert by_dataset(families["odometer_dataset_open_reservations"]) == {basic: 1, split: 2}
    assert views[basic]["status"]["reserved"]["open"] == 1
    # labels: the dataset's id, name and organisation
    for sample in families["odometer_dataset_budget_epsilon"]:
        v = views[sample.labels["dataset_id"]]
        assert sample.labels == {
            "dataset_id": v["id"],
            "dataset_name": v["name"],
            "organisation": v["organisation"],
        }
    # what is left, per unit (and sub-budget): the status summary's fractions, where it has one
    left = {
        (s.labels["dataset_id"], s.labels["unit"], s.labels.get("sub_budget", "")): s.value
        for s in families["odometer_dataset_left_fraction"]
    }
    assert len(left) == len(families["odometer_dataset_left_fraction"])
    assert left == {
        (ds, item["unit"], item.get("sub_budget") or ""): float(item["fraction"])
        for ds, v in views.items()
        for item in (v["status"].get("summary") or {}).get("left", [])
    }
    if all("summary" in v["status"] for v in views.values()):
        assert left[(basic, "epsilon", "")] == float("0.55")  # 1 - 0.45 (0.2 reserved)
        assert {(ds, sub) for ds, _, sub in left if ds == split} == {(split, "a"), (split, "b")}
    # the unlisted dataset has no series; the series are bounded by the list
    exported = {
        s.labels["dataset_id"]
        for name, samples in families.items()
        if name.startswith("odometer_dataset_")
        for s in samples
    }
    assert exported == {basic, zcdp, split, partitioned}
    assert unlisted not in exported and len(exported) <= len(refs)
    assert one(families, "odometer_metrics_datasets_listed") == len(refs)
    assert one(families, "odometer_metrics_datasets_missing") == 2
    assert one(families, "odometer_metrics_datasets_ambiguous") == 0
    assert one(families, "odometer_metrics_budget_up") == 1
    assert one(families, "odometer_metrics_budget_scrape_errors") == 0  # sample: ..._total
    assert one(families, "odometer_metrics_budget_scrape_seconds") >= 0


def test_the_gauges_follow_the_ledger_at_each_scrape(
    client: TestClient, settings: Settings, database: Database
) -> None:
    ds = basic_dataset(client, name=unique("live"))["id"]
    with listing(settings, database, [ds]) as listed:
        before = scrape(listed)
        invoke(listed, ds, {"type": "pure_dp", "epsilon": "0.25"})
        after = scrape(listed)
        reading = view(listed, ds)["status"]["odometer"]
    assert by_dataset(before["odometer_dataset_certified_epsilon"]) == {ds: 0}
    assert by_dataset(after["odometer_dataset_certified_epsilon"]) == {
        ds: float(reading["epsilon"])
    }
    assert float(reading["epsilon"]) == 0.25
    assert by_dataset(after["odometer_dataset_ledger_seq"]) == {ds: 2}


def test_a_shared_name_is_counted_not_exported(
    client: TestClient, settings: Settings, database: Database
) -> None:
    name = unique("twin")
    first = basic_dataset(client, name=name)["id"]
    second = basic_dataset(client, name=name)["id"]
    with listing(settings, database, [name]) as listed:
        families = scrape(listed)
    assert families["odometer_dataset_budget_epsilon"] == []
    assert one(families, "odometer_metrics_datasets_ambiguous") == 1
    assert one(families, "odometer_metrics_datasets_missing") == 0
    # listed by id, each is exported (and the name beside them is still ambiguous)
    with listing(settings, database, [first, second, name]) as listed:
        families = scrape(listed)
    assert set(by_dataset(families["odometer_dataset_budget_epsilon"])) == {first, second}
    assert one(families, "odometer_metrics_datasets_ambiguous") == 1


def test_no_list_no_budget_series(client: TestClient) -> None:
    families = scrape(client)
    assert not [name for name in families if name.startswith("odometer_dataset_")]
    assert "odometer_metrics_budget_up" not in families
    assert "odometer_http_requests" in families  # the process's metrics as before


def test_a_failing_read_leaves_metrics_answering() -> None:
    """A database without the service's tables: every read fails. ``/metrics`` still answers,
    with the failure counted and no budget series (never stale ones)."""
    settings = Settings(database_url="sqlite://", metrics_datasets=("anything",))
    with TestClient(create_app(settings)) as client:
        first = scrape(client)
        second = scrape(client)
    assert one(first, "odometer_metrics_budget_up") == 0
    assert one(first, "odometer_metrics_budget_scrape_errors") == 1
    assert one(second, "odometer_metrics_budget_scrape_errors") == 2
    assert first["odometer_dataset_certified_epsilon"] == []
    assert first["odometer_metrics_datasets_missing"] == []  # unknown, not zero
    assert "odometer_http_requests" in second


# ---------------------------------------------------------------------------- the setting
def test_the_setting_lists_each_dataset_once() -> None:
    assert Settings().metrics_datasets == ()
    assert Settings(metrics_datasets=" a, b ,,a,").metrics_datasets == ("a", "b")
    assert Settings(metrics_datasets=["x ", "y"]).metrics_datasets == ("x", "y")
    most = ",".join(f"ds-{i}" for i in range(MAX_METRICS_DATASETS))
    assert len(Settings(metrics_datasets=most).metrics_datasets) == MAX_METRICS_DATASETS
    with pytest.raises(ValidationError, match="at most 100"):
        Settings(metrics_datasets=most + ",one-more")
    with pytest.raises(ValidationError, match="'\\*'"):
        Settings(metrics_datasets="a,*")


@pytest.mark.parametrize(
    ("listed", "line"),
    [
        (
            ",".join(f"ds-{i}" for i in range(MAX_METRICS_DATASETS + 1)),
            "python -m app.serve: ODOMETER_METRICS_DATASETS lists 101 datasets; at most 100 are "
            "exported (each adds series to every scrape): list fewer",
        ),
        (
            "*",
            "python -m app.serve: ODOMETER_METRICS_DATASETS names datasets by id or name; '*' "
            "(every dataset) is not accepted, so that the series stay bounded: list the "
            "datasets (a dataset named '*': give its id)",
        ),
    ],
)
def test_an_unbounded_list_stops_the_server_in_one_line(listed: str, line: str) -> None:
    env = {**os.environ, "ODOMETER_METRICS_DATASETS": listed, "PYTHONPATH": str(ROOT)}
    env.pop("ODOMETER_ADMIN_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "app.serve", "--port", "9"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [line]


# ---------------------------------------------------------------------------- the dashboard
#: PromQL words that are not metric names (functions are told apart by the "(" after them).
PROMQL_WORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
    | {"unless", "offset", "inf", "nan"}
)
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w$.:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: what is left once strings, label matchers,
    ranges, grouping clauses and dashboard variables are taken out, less functions (a name
    followed by "(") and keywords."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}", " ", bare)
    bare = re.sub(r"\[[^\]]*\]", " ", bare)
    bare = _GROUPING.sub(" ", bare)
    bare = re.sub(r"\$\{?\w+\}?", " ", bare)
    return {n for n in _NAME.findall(bare) if n.lower() not in PROMQL_WORDS}


def test_metric_names_of_promql() -> None:
    assert metric_names(
        'histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{route=~"$route"}'
        "[$__rate_interval])))"
    ) == {"a_bucket"}
    assert metric_names('max by (x) (b{l="c"}) / max without (y) (d offset 5m)') == {"b", "d"}
    assert metric_names("sum(rate(e_total[5m])) * on (job) group_left (z) f") == {"e_total", "f"}


def exported_names(families: dict[str, list[Sample]], types: dict[str, str]) -> set[str]:
    """Every series name a scrape declares: the families' (a family may be empty), their
    samples', and a histogram's or counter's suffixed names."""
    suffixes = {"histogram": ("_bucket", "_count", "_sum"), "counter": ("_total",)}
    names = set(families)
    for name, samples in families.items():
        names.update(s.name for s in samples)
        names.update(name + suffix for suffix in suffixes.get(types[name], ()))
    return names


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row's


def test_the_grafana_dashboard_reads_only_exported_metrics(
    client: TestClient, settings: Settings, database: Database
) -> None:
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    ds = basic_dataset(client, name=unique("graphed"))["id"]
    invoke(client, ds, {"type": "pure_dp", "epsilon": "0.1"})
    with listing(settings, database, [ds]) as listed:
        view(listed, ds)  # a request this app's histogram and counters saw
        r = listed.get("/metrics")
    parsed = list(text_string_to_metric_families(r.text))
    families = {f.name: list(f.samples) for f in parsed}
    exported = exported_names(families, {f.name: f.type for f in parsed})
    samples = [s for f in parsed for s in f.samples]
    # the datasource is an input of the import, and every panel and query uses it
    (source,) = dashboard["__inputs"]
    assert source == {**source, "name": "DS_PROMETHEUS", "type": "datasource"}
    assert source["pluginId"] == "prometheus"
    uses = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    assert dashboard["uid"] and dashboard["schemaVersion"] >= 36
    exprs: list[str] = []
    for panel in panels(dashboard):
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == uses, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for t in panel["targets"]:
            assert t["datasource"] == uses, panel["title"]
            exprs.append(t["expr"])
    read: set[str] = set()
    for variable in dashboard["templating"]["list"]:
        assert variable["datasource"] == uses, variable["name"]
        query = variable["query"]
        values = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query["query"])
        assert values, variable["name"]
        metric, label = values.groups()
        assert any(s.name == metric and label in s.labels for s in samples), variable["name"]
        read.add(metric)
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= exported, f"{expr!r} reads {sorted(names - exported)}, not exported"
        read |= names
    # the panels the issue asks for: budgets, left fractions, ledger growth, latency, decisions
    for name in (
        "odometer_dataset_certified_epsilon",
        "odometer_dataset_budget_epsilon",
        "odometer_dataset_left_fraction",
        "odometer_dataset_ledger_seq",
        "odometer_http_request_duration_seconds_bucket",
        "odometer_decisions_total",
    ):
        assert name in read, name
