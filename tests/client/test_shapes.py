"""The parts of the client's results (:mod:`odometer_client.shapes`) and the bodies it sends
(:mod:`odometer_client._bodies`) say what the server's document says: each TypedDict has its
schema's keys, and a key a part of a result requires is one the schema requires (a key the
schema leaves optional is ``NotRequired``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from odometer_client import _bodies, shapes

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS: dict[str, Any] = json.loads((ROOT / "openapi/openapi.json").read_text("utf-8"))[
    "components"
]["schemas"]

#: Each part and the schema it is read from (the report's and the blocks' parts as written).
PARTS: list[tuple[Any, str]] = [
    (shapes.Reading, "OdometerReading"),
    (shapes.Left, "LeftAmount"),
    (shapes.MoreOfLast, "MoreOfLast"),
    (shapes.Summary, "Summary"),
    (shapes.SummaryShown, "SummaryShown"),
    (shapes.ShownReading, "ShownReading"),
    (shapes.ShownCounted, "ShownCounted"),
    (shapes.StatusShown, "StatusShown"),
    (shapes.RefusalSummary, "RefusalSummary"),
    (shapes.Frozen, "FrozenStatus"),
    (shapes.Partition, "PartitionIn"),
    (shapes.Fit, "Fit"),
    (shapes.ClosedCap, "ClosedCap"),
    (shapes.Statement, "OrganisationStatement"),
    (shapes.MyQuota, "QuotaOut"),
    (shapes.MyGrant, "MyGrant"),
    (shapes.ReportDataset, "ReportDataset"),
    (shapes.Guarantee, "Guarantee"),
    (shapes.SpendPoint, "SpendPointOut"),
    (shapes.SpendSeries, "SpendSeries"),
    (shapes.Curve, "RdpCurve"),
    (shapes.Attribution, "Attribution"),
    (shapes.MechanismTotals, "MechanismTotalsOut"),
    (shapes.AnalystTotals, "AnalystTotalsOut"),
    (shapes.Refunds, "Refunds"),
    (shapes.Rejections, "Rejections"),
    (shapes.LedgerSummary, "LedgerSummary"),
    (shapes.ChainHead, "ChainHead"),
    (shapes.Verification, "Verification"),
    (shapes.RunText, "BlockRun"),
    (shapes.BlocksPageText, "BlocksPage"),
    (shapes.EpsilonDelta, "EpsilonDeltaAmount"),
    (shapes.Cap, "ClosedCap"),  # a cap in force: a closed cap's mode and amounts, no seq
    (_bodies.BudgetBody, "Budget"),
    (_bodies.DatasetBody, "DatasetCreate"),
    (_bodies.BudgetChangeBody, "BudgetPatch"),
    (_bodies.InvocationBody, "InvocationCreate"),
    (_bodies.SettleBody, "SettleRequest"),
    (_bodies.GrantBody, "GrantCreate"),
    (_bodies.CapBody, "OrganisationCap"),
    (_bodies.CapacityBody, "CapacityQuery"),
    (_bodies.PrincipalBody, "PrincipalCreate"),
]
#: Parts that hold fewer keys than their schema, and why.
FEWER = {
    "Cap": {"after_seq"},  # the cap in force has not been replaced
    "DatasetBody": {"organisation_id"},  # the client creates in its key's organisation
    "BudgetChangeBody": {"workload"},  # change_budget sends no workload
}


@pytest.mark.parametrize(("part", "name"), PARTS, ids=[p.__name__ for p, _ in PARTS])
def test_a_part_has_its_schemas_keys(part: Any, name: str) -> None:
    schema = SCHEMAS[name]
    declared = set(schema["properties"])
    keys = set(part.__required_keys__ | part.__optional_keys__)
    fewer = FEWER.get(part.__name__, set())
    assert fewer <= declared
    assert keys == declared - fewer, f"{part.__name__}: {sorted(keys ^ (declared - fewer))}"
    if part.__module__ == _bodies.__name__:
        return  # a body's required keys are those the client always sends
    # what a part requires, its schema requires (total=False parts require nothing)
    required = set(part.__required_keys__)
    assert required <= set(schema.get("required", ())), sorted(required - set(schema["required"]))


def test_an_amount_has_every_units_keys() -> None:
    units = ("EpsilonDeltaAmount", "RhoDeltaAmount", "RdpAmount", "MuSquaredAmount")
    keys = set().union(*(SCHEMAS[u]["properties"] for u in units))
    assert set(shapes.Amount.__optional_keys__) == keys
    assert shapes.Amount.__required_keys__ == frozenset()
