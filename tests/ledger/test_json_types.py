"""The TypedDicts of :mod:`odometer_core.accounting.json_types` say what their builders write:
every key a builder writes is declared, and every key declared required is written
(``NotRequired`` keys and the keys of a ``total=False`` TypedDict may be absent). A builder
that gains or loses a key fails here until its type says so."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NotRequired, get_origin, get_type_hints

import pytest

from odometer_core.accounting import (
    admit,
    capacity,
    initial_state,
    make_config,
    parse_declaration,
    state_to_json,
    status,
)
from odometer_core.accounting.json_types import (
    Attribution,
    BlockSpan,
    CapacityJSON,
    CapOrder,
    ClosedPhaseJSON,
    CosignedJSON,
    CurveJSON,
    ExportedEntry,
    ForkJSON,
    LeftItem,
    LevelPart,
    MoreOfLast,
    OdometerReading,
    PartitionedPart,
    PartitionedState,
    PartitionJSON,
    RefusalSummary,
    StatementJSON,
    StatusView,
    Summary,
    WitnessedJSON,
)
from odometer_core.accounting.levels import ClosedPhase, cap_order, level_record, statement_sum
from odometer_core.accounting.summary import Spend, refusal, summarise
from odometer_core.ledger import EntryKind, next_entry
from odometer_core.ledger.blocks import Partitioned, reading_of
from odometer_core.ledger.cosign import Fork
from odometer_core.ledger.witness import Cosigned, Witnessed
from odometer_core.partition import new_partition

SPLIT = {
    "mode": "split",
    "sub_budgets": [
        {"name": "a", "budget": {"epsilon": "1", "delta": "1e-7"}, "accounting": {"mode": "rdp"}},
        {"name": "b", "budget": {"epsilon": "1", "delta": "0"}, "accounting": {"mode": "basic"}},
    ],
}
ACCOUNTINGS = [{"mode": "basic"}, {"mode": "zcdp"}, {"mode": "rdp"}, {"mode": "gdp"}, SPLIT]
GAUSSIAN = parse_declaration({"type": "gaussian", "sigma": 10, "sensitivity": 1})
PURE = parse_declaration({"type": "pure_dp", "epsilon": "0.3"})


def _keys(typed: Any) -> tuple[set[str], set[str]]:
    """The required and the optional keys of a TypedDict, read from its annotations (the
    runtime's own ``__required_keys__`` misses ``NotRequired`` under postponed annotations)."""
    hints = get_type_hints(typed, include_extras=True)
    if not typed.__total__:
        return set(), set(hints)
    optional = {name for name, hint in hints.items() if get_origin(hint) is NotRequired}
    return set(hints) - optional, optional


def _fits(typed: Any, obj: Mapping[str, Any]) -> None:
    required, optional = _keys(typed)
    assert required <= set(obj), (typed.__name__, "missing", sorted(required - set(obj)))
    assert set(obj) <= required | optional, (
        typed.__name__,
        "undeclared",
        sorted(set(obj) - required - optional),
    )


def test_the_key_reader_tells_required_from_optional() -> None:
    assert _keys(LeftItem) == ({"unit", "amount", "budget", "fraction"}, {"order", "sub_budget"})
    assert _keys(CapOrder) == (set(), {"seq", "config", "before", "replaced"})
    with pytest.raises(AssertionError, match="undeclared"):
        _fits(BlockSpan, {"from": "0", "to": "1", "blocks": 2, "extra": 1})
    with pytest.raises(AssertionError, match="missing"):
        _fits(BlockSpan, {"from": "0", "to": "1"})


@pytest.mark.parametrize("accounting", ACCOUNTINGS, ids=lambda a: str(a["mode"]))
def test_a_status_summary_and_refusal_are_what_their_types_say(accounting: Any) -> None:
    config = make_config("2", "0.000001", "add_remove", accounting)
    split = accounting["mode"] == "split"
    declaration = PURE if accounting["mode"] == "basic" else GAUSSIAN
    sub = "a" if split else None
    state = initial_state(config)
    for _ in range(3):
        state = admit(config, state, declaration, sub_budget=sub).state
    view = status(config, state)
    _fits(StatusView, {k: view[k] for k in ("mode", "budget", "odometer")})
    _fits(OdometerReading, view["odometer"])
    summary = summarise(config, state, declaration, sub_budget=sub)
    _fits(Summary, summary)
    fit = capacity(config, state, declaration, sub_budget=sub).to_json()
    assert summary["more"] is not None and fit["count"] == summary["more"]["count"]
    _fits(CapacityJSON, fit)
    assert summary["left"]
    for item in summary["left"]:
        _fits(LeftItem, item)
    assert all(("sub_budget" in item) == split for item in summary["left"])
    assert summary["more"] is not None and summary["more"]["of"] == declaration.to_json()
    _fits(MoreOfLast, summary["more"])
    big = parse_declaration({"type": "gaussian", "sigma": "0.01", "sensitivity": 1})
    if accounting["mode"] == "basic":
        big = parse_declaration({"type": "pure_dp", "epsilon": "5"})
    decision = admit(config, state, big, sub_budget=sub)
    assert not decision.admitted
    refused = refusal(config, state, big, level="dataset", reason=decision.reason, sub_budget=sub)
    _fits(RefusalSummary, refused)


def test_an_attribution_and_a_curve_are_what_their_types_say() -> None:
    config = make_config("2", "0.000001", "add_remove", {"mode": "rdp"})
    spend = Spend()
    spend.add({"orders": ["2", "4"], "rdp": ["0.1", "0.2"]}, None)
    curve = spend.curve_json()
    assert curve == {"orders": ["2", "4"], "rdp": ["0.1", "0.2"]}
    _fits(CurveJSON, curve)
    _fits(Attribution, spend.attribution(config))


def test_an_entry_and_its_level_parts_are_what_their_types_say() -> None:
    config = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    state = initial_state(config)
    decision = admit(config, state, PURE)
    part = level_record("org_1", (config, state), decision, applied=True, budget=True)
    _fits(LevelPart, part)
    quota = level_record("ana", (config, state), decision, applied=False, granted_seq=4)
    assert quota["grant"] == 4 and quota["charge"] is None
    _fits(LevelPart, quota)
    order = cap_order(
        1, None, None, {"epsilon": "1", "delta": "0.000001"}, state_to_json(state), []
    )
    assert order["seq"] == 1 and "config" in order and "before" in order
    _fits(CapOrder, order)
    _fits(LevelPart, {**part, **order})
    entry = next_entry(
        dataset_id="ds_1",
        head_seq=0,
        head_hash=None,
        kind=EntryKind.INVOCATION_ACCEPTED,
        actor="ana",
        at="2026-11-29T00:00:00.000000Z",
        accounting_version="1.7.0",
        state=state_to_json(decision.state),
        declaration=PURE.to_json(),
        charge=decision.charge.to_json(),
        org=part,
    )
    _fits(ExportedEntry, entry.to_export())


@pytest.mark.parametrize(
    "declared",
    [
        {"kind": "day", "unit": "record", "timezone": "UTC"},
        {"kind": "bucket", "unit": "person", "buckets": 16, "immutable_key": True},
        {"kind": "named", "unit": "record", "names": ["eu", "us"]},
    ],
)
def test_a_partition_its_spans_and_its_aggregate_are_what_their_types_say(
    declared: dict[str, Any],
) -> None:
    partition = new_partition(declared)
    stored = partition.to_json()
    assert stored == declared  # written back as declared
    _fits(PartitionJSON, stored)
    for span in partition.keys([(0, 2)]):
        _fits(BlockSpan, span)
    config = make_config("1", "0", "add_remove", {"mode": "basic"})
    reading = reading_of(config, initial_state(config))
    assert reading["epsilon"] == "0" and reading["certified"] is True
    aggregate = Partitioned(1, 1, ((0, 2),), None, reading).to_json()
    _fits(PartitionedState, aggregate)
    _fits(PartitionedPart, aggregate["blocks"])
    legacy = Partitioned(1, 1, ((0, 2),), None, None, legacy=True).to_json()
    assert "highest" not in legacy["blocks"]  # a state written before it had none
    _fits(PartitionedPart, legacy["blocks"])


def test_the_heads_are_what_their_types_say() -> None:
    witnessed = Witnessed("ds_1", 3, "ab" * 32, 1, "2026-11-29T00:00:00Z", "k", "sig")
    _fits(WitnessedJSON, witnessed.to_json())
    cosigned = Cosigned("ds_1", 1, 3, bytes(32), 1_700_000_000, "note")
    _fits(CosignedJSON, cosigned.to_json())
    fork = Fork("ds_1", 5, "cd" * 32, "at", "admin", "restored", 4, 7, "ef" * 32, None)
    assert fork.to_json()["lost"] == [5, 7]
    _fits(ForkJSON, fork.to_json())


def test_a_closed_cap_and_the_organisation_statement_are_what_their_types_say() -> None:
    config = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    phase = ClosedPhase("basic", Decimal("0.4"), Decimal("0"), 7)
    closed = phase.to_json()
    assert closed == {"mode": "basic", "epsilon": "0.4", "delta": "0", "after_seq": 7}
    _fits(ClosedPhaseJSON, closed)
    state = admit(config, initial_state(config), PURE).state
    statement = statement_sum([phase], config, state)
    assert statement == {"epsilon": "0.7", "delta": "0", "phases": 2}  # 0.4 closed + 0.3 now
    _fits(StatementJSON, statement)
    order = cap_order(8, None, None, {"epsilon": "1", "delta": "0"}, state_to_json(state), [closed])
    assert order.get("replaced") == closed  # replaced just before: carried forward
    _fits(CapOrder, order)
