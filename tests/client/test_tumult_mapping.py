"""The Tumult adapter without Spark: Tumult budgets to declarations (exact, read up), the
protected change against the dataset's relation, the registration's key, and the order of
``evaluate`` (the Session's check, the registration, the measurement) against a served app.
Tumult Analytics is not in the project's venv: its budget classes, metrics and Session are
small stand-ins here that carry what the adapter reads (the class names, ``value``,
``_input_metric``, the compile step and the accountant); the real ones are exercised in
``tests/adapters_tumult`` (``make test-tumult``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Any

import pytest

from odometer_client import OdometerClient
from odometer_client.adapters import tumult as adapter
from odometer_client.declarations import approx_dp, pure_dp, zcdp


class PureDPBudget:
    def __init__(self, epsilon: Any) -> None:
        self.value = epsilon

    def __repr__(self) -> str:
        return f"PureDPBudget({self.value})"


class ApproxDPBudget:
    def __init__(self, epsilon: Any, delta: Any) -> None:
        self.value = (epsilon, delta)


class RhoZCDPBudget:
    def __init__(self, rho: Any) -> None:
        self.value = rho


@dataclass
class Rational:
    """sympy's Rational as ExactNumber.expr has it."""

    p: int
    q: int
    is_Rational: bool = True


@dataclass
class Irrational:
    is_Rational: bool = False
    is_infinite: bool = False


@dataclass
class ExactNumber:
    """Tumult Core's ExactNumber: a sympy expression, and a directed float conversion."""

    expr: Any
    upward: float = 0.0
    is_finite: bool = True

    def to_float(self, round_up: bool) -> float:
        assert round_up
        return self.upward


def test_pure_approximate_and_zcdp_budgets_map_to_their_kinds() -> None:
    assert adapter.declaration(PureDPBudget(ExactNumber(Rational(1, 4)))).to_json() == {
        "type": "pure_dp",
        "epsilon": "0.25",
    }
    approx = adapter.declaration(ApproxDPBudget(ExactNumber(Rational(1, 2)), Fraction(1, 10**6)))
    assert approx.to_json() == {"type": "approx_dp", "epsilon": "0.5", "delta": "0.000001"}
    assert adapter.declaration(RhoZCDPBudget(ExactNumber(Rational(1, 8)))).to_json() == {
        "type": "zcdp",
        "rho": "0.125",
    }
    # (ε, 0) is pure ε-DP: declared as pure_dp
    assert adapter.declaration(ApproxDPBudget(1, 0)).to_json() == {
        "type": "pure_dp",
        "epsilon": "1",
    }


def test_binary_floats_and_rationals_are_read_up_to_17_digits() -> None:
    # Tumult holds the float 0.3 as its exact value 0.299999999999999988897769753748…
    p, q = Fraction(0.3).as_integer_ratio()
    declared = adapter.declaration(PureDPBudget(ExactNumber(Rational(p, q))))
    assert declared.to_json()["epsilon"] == "0.29999999999999999"
    assert Fraction(Decimal("0.29999999999999999")) >= Fraction(0.3)
    # 1/3 is not a 17-digit decimal: rounded up, never below it
    third = adapter.declaration(RhoZCDPBudget(ExactNumber(Rational(1, 3)))).to_json()["rho"]
    assert third == "0.33333333333333334"
    assert (
        Fraction(Decimal(third)) - Fraction(1, 10**17) < Fraction(1, 3) < Fraction(Decimal(third))
    )
    # an irrational budget goes through Tumult's own upward float
    root = ExactNumber(Irrational(), upward=0.7071067811865476)
    assert adapter.declaration(PureDPBudget(root)).to_json()["epsilon"] == "0.70710678118654758"
    # plain floats (a stand-in or an older Tumult) are read exactly, then up
    assert adapter.declaration(RhoZCDPBudget(0.03)).to_json()["rho"] == "0.029999999999999999"


class MyBudget(PureDPBudget):
    """A subclass of a Tumult budget is that budget."""


def test_a_subclass_maps_as_its_tumult_base() -> None:
    assert adapter.declaration(MyBudget(2)).to_json() == {"type": "pure_dp", "epsilon": "2"}


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        (PureDPBudget(float("inf")), "infinite"),
        (PureDPBudget(ExactNumber(Irrational(is_infinite=True), is_finite=False)), "infinite"),
        (ApproxDPBudget(1, 1), "δ is 1"),
        (RhoZCDPBudget(-0.5), "negative"),
        (RhoZCDPBudget(float("nan")), "NaN"),
        (PureDPBudget("1"), "not a number"),
        (object(), "not a Tumult privacy budget"),
    ],
)
def test_what_cannot_be_declared_is_refused(budget: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        adapter.declaration(budget)


# ------------------------------------------------------------------ the protected change
class SymmetricDifference:
    pass


@dataclass
class SumOf:
    inner_metric: Any


@dataclass
class IfGroupedBy:
    inner_metric: Any


class AddRemoveKeys:
    pass


@dataclass(frozen=True)
class NamedTable:
    name: str


@dataclass
class DictMetric:
    key_to_metric: dict[Any, Any]


@dataclass
class Protected:
    _input_metric: DictMetric


ROWS = Protected(DictMetric({NamedTable("visits"): SymmetricDifference()}))
GROUPS = Protected(
    DictMetric({NamedTable("visits"): IfGroupedBy(SumOf(SymmetricDifference()))})
)  # AddMaxRowsInMaxGroups
IDS = Protected(
    DictMetric(
        {
            NamedTable("visits"): SymmetricDifference(),
            NamedTable("default_id_space"): AddRemoveKeys(),
        }
    )
)


def test_the_protected_change_is_read_from_the_sessions_metric() -> None:
    assert adapter.protected_rows(ROWS) == {"visits": "rows"}
    assert adapter.protected_rows(GROUPS) == {"visits": "rows"}
    assert adapter.protected_rows(IDS) == {"visits": "rows", "default_id_space": "AddRemoveKeys"}


def test_rows_on_add_remove_are_consistent_and_anything_else_is_refused() -> None:
    adapter.check_relation(ROWS, "add_remove")
    adapter.check_relation(GROUPS, "add_remove")
    with pytest.raises(adapter.RelationMismatch, match="'default_id_space' \\(AddRemoveKeys\\)"):
        adapter.check_relation(IDS, "add_remove")
    with pytest.raises(adapter.RelationMismatch, match="twice the privacy loss"):
        adapter.check_relation(ROWS, "replace_one")
    # blocks that protect persons: any or all of a person's records, twice what either states
    for session in (ROWS, IDS):
        with pytest.raises(adapter.RelationMismatch, match=r"unit 'person'.*distance 2"):
            adapter.check_relation(session, "add_remove", "person")
    adapter.check_relation(ROWS, "add_remove", "record")


def test_only_pure_and_approximate_budgets_have_a_reservation() -> None:
    assert adapter.reservation(pure_dp("0.5")) is not None
    assert adapter.reservation(approx_dp("0.5", "1e-7")).to_json() == {  # type: ignore[union-attr]
        "type": "odp",
        "cells": [
            {"name": "measured", "epsilon": "0.5"},
            {"name": "not_measured", "epsilon": "0.5"},
        ],
        "delta": "1E-7",
    }
    assert adapter.reservation(zcdp("0.125")) is None


# ------------------------------------------------------------------ the key
def test_the_key_charges_the_same_query_at_the_same_place_once() -> None:
    declared = pure_dp("0.5")
    key = adapter.idempotency_key("ds_1", "run", 0, "count()", declared)
    assert key == adapter.idempotency_key("ds_1", "run", 0, "count()", declared)
    assert key.startswith("tumult-") and len(key) == len("tumult-") + 64
    others = {
        adapter.idempotency_key("ds_2", "run", 0, "count()", declared),
        adapter.idempotency_key("ds_1", "other run", 0, "count()", declared),
        adapter.idempotency_key("ds_1", "run", 1, "count()", declared),
        adapter.idempotency_key("ds_1", "run", 0, "sum()", declared),
        adapter.idempotency_key("ds_1", "run", 0, "count()", pure_dp("0.25")),
    }
    assert key not in others and len(others) == 5


class Mechanism(Enum):
    DEFAULT = 1


@dataclass
class Row:
    values: tuple[Any, ...]

    def __iter__(self) -> Any:
        return iter(self.values)


class KeySet:
    """Tumult's KeySet: its rows come from a Spark DataFrame (here, in any order)."""

    def __init__(self, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        self._columns, self._rows = columns, rows

    def columns(self) -> list[str]:
        return self._columns

    def dataframe(self) -> Any:
        rows = [Row(r) for r in self._rows]
        return type("Frame", (), {"collect": lambda _self: rows})()


@dataclass(frozen=True)
class PrivateSource:
    source_id: str


@dataclass(frozen=True)
class GroupByCount:
    child: Any
    groupby_keys: Any
    mechanism: Mechanism
    low: float = 0.5


def _doubled(x: int) -> int:
    return 2 * x


def _times(k: int) -> Any:
    def times(x: int) -> int:
        return k * x

    return times


def test_a_query_is_described_the_same_in_every_process() -> None:
    """A query's repr names its KeySet by address (a new one in every process): the key reads
    the KeySet's rows instead, whatever their order."""
    one = GroupByCount(PrivateSource("visits"), KeySet(["r"], [("a",), ("b",)]), Mechanism.DEFAULT)
    two = GroupByCount(PrivateSource("visits"), KeySet(["r"], [("b",), ("a",)]), Mechanism.DEFAULT)
    assert repr(one) != repr(two)  # the addresses differ
    assert adapter.described(one) == adapter.described(two)
    declared = pure_dp("0.5")
    key = adapter.idempotency_key("ds", "run", 0, Query(one), declared)  # type: ignore[arg-type]
    assert key == adapter.idempotency_key("ds", "run", 0, Query(two), declared)  # type: ignore[arg-type]
    other = GroupByCount(PrivateSource("visits"), KeySet(["r"], [("a",)]), Mechanism.DEFAULT)
    assert key != adapter.idempotency_key("ds", "run", 0, Query(other), declared)  # type: ignore[arg-type]
    assert adapter.described(one) == [
        "GroupByCount",
        {
            "child": ["PrivateSource", {"source_id": "visits"}],
            "groupby_keys": ["KeySet", ["r"], ["('a',)", "('b',)"]],
            "mechanism": "Mechanism.DEFAULT",
            "low": "0.5",
        },
    ]
    # a function by its name, bytecode, closure and defaults
    function = adapter.described(_doubled)
    assert function[:2] == ["function", f"{__name__}._doubled"] and len(function[2]) == 64
    assert function[3:] == [[], []]
    assert adapter.described(_times(2)) != adapter.described(_times(3))
    assert adapter.described(_times(2)) == adapter.described(_times(2))
    # an object known only by its address keeps it: two of them are never one charge
    first, second = object(), object()
    assert adapter.described(first) == ["object", repr(first)]
    assert adapter.described(first) != adapter.described(second)


# ------------------------------------------------------------------ the order of evaluate
class InsufficientBudgetError(ValueError):
    """Tumult Core's error for a budget the accountant cannot spend."""


@dataclass
class Left:
    epsilon: Fraction

    def assert_can_spend_budget(self, requested: Fraction) -> None:
        if requested > self.epsilon:
            raise InsufficientBudgetError(f"{self.epsilon} left, {requested} requested")


@dataclass
class State:
    name: str = "ACTIVE"


@dataclass
class Accountant:
    _privacy_budget: Left
    state: State = field(default_factory=State)


@dataclass
class Query:
    _query_expr: str


class FakeSession(Protected):
    """A row-protecting pure-DP Session: compiles to the budget asked, spends on evaluate."""

    def __init__(self, epsilon: Fraction) -> None:
        super().__init__(ROWS._input_metric)
        self._accountant = Accountant(Left(epsilon))
        self.measured: list[str] = []

    @property
    def remaining_privacy_budget(self) -> PureDPBudget:
        return PureDPBudget(self._accountant._privacy_budget.epsilon)

    def _compile_and_get_info(self, query: str, budget: PureDPBudget) -> tuple[Any, Any, Any]:
        return None, budget, None

    def evaluate(self, query: Query, budget: PureDPBudget) -> str:
        left = self._accountant._privacy_budget
        try:
            left.assert_can_spend_budget(budget.value)
        except InsufficientBudgetError as exc:
            raise RuntimeError("Cannot answer query without exceeding the budget") from exc
        left.epsilon -= budget.value
        self.measured.append(query._query_expr)
        return f"noisy {query._query_expr}"


def test_evaluate_checks_the_session_then_registers_then_measures(client: OdometerClient) -> None:
    ds = client.create_dataset("tumult-fake", "1", "0.000001")
    session = FakeSession(Fraction(2))
    wrapped = adapter.OdometerSession(client, ds.id, session, run="fake")
    assert wrapped.evaluate(Query("count"), PureDPBudget(Fraction(3, 4))) == "noisy count"
    assert session.measured == ["count"]
    assert [d.to_json() for d in wrapped.declarations] == [{"type": "pure_dp", "epsilon": "0.75"}]
    # on a basic dataset the query is registered as a reservation of its ε, settled once measured
    assert [d.to_json() for d in wrapped.registered] == [
        {
            "type": "odp",
            "cells": [
                {"name": "measured", "epsilon": "0.75"},
                {"name": "not_measured", "epsilon": "0.75"},
            ],
        }
    ]
    # the odometer refuses (0.75 + 0.5 > 1): nothing measured, the Session's budget untouched
    with pytest.raises(adapter.QueryRefused):
        wrapped.evaluate(Query("sum"), PureDPBudget(Fraction(1, 2)))
    assert session.measured == ["count"]
    assert wrapped.remaining_privacy_budget.value == Fraction(5, 4)
    # the Session would refuse (1.5 > 1.25 left): nothing is sent
    with pytest.raises(adapter.SessionRefused, match="nothing was sent to the odometer"):
        wrapped.evaluate(Query("mean"), PureDPBudget(Fraction(3, 2)))
    kinds = [e.kind for e in client.ledger(ds) if e.kind.startswith("invocation_")]
    assert kinds == ["invocation_reserved", "invocation_settled", "invocation_rejected"]
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.75")
    # a stopped Session: refused before anything is sent
    session._accountant.state.name = "RETIRED"
    with pytest.raises(adapter.SessionRefused, match="no longer active"):
        wrapped.evaluate(Query("count"), PureDPBudget(Fraction(1, 8)))
    with pytest.raises(NotImplementedError, match="partition_and_create"):
        wrapped.partition_and_create("visits", PureDPBudget(1), "region", {})


class Racing:
    """A client whose registrations let another caller spend the Session meanwhile."""

    def __init__(self, client: OdometerClient, session: FakeSession) -> None:
        self.client = client
        self.session = session
        self.race = True

    def register(self, *args: Any, **kwargs: Any) -> Any:
        invocation = self.client.register(*args, **kwargs)
        if self.race:
            self.session._accountant._privacy_budget.epsilon = Fraction(0)  # spent meanwhile
        return invocation

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_a_reservation_the_session_refused_is_cancelled_and_never_taken_again(
    client: OdometerClient,
) -> None:
    ds = client.create_dataset("tumult-fake-race", "1", "0.000001")
    session = FakeSession(Fraction(1))
    racing = Racing(client, session)
    wrapped = adapter.OdometerSession(racing, ds, session, run="race")
    with pytest.raises(adapter.RegistrationCancelled, match="was cancelled") as cancelled:
        wrapped.evaluate(Query("count"), PureDPBudget(Fraction(1, 4)))
    assert isinstance(cancelled.value, adapter.SessionRefused)
    assert cancelled.value.settlement.status == "cancelled"
    assert session.measured == []
    assert wrapped.invocations == [] and wrapped.cancelled == [cancelled.value.invocation]
    status = client.get_dataset(ds).status
    assert status["odometer"]["epsilon"] == 0 and status["reserved"]["epsilon"] == 0
    kinds = [e.kind for e in client.ledger(ds) if e.kind.startswith("invocation_")]
    assert kinds == ["invocation_reserved", "invocation_cancelled"]
    assert status["spent"] == {"epsilon": 0, "delta": 0}

    # the same query at the same place once the Session can answer it: the cancelled
    # reservation's key is not taken for it (its stored answer says "reserved")
    racing.race = False
    session._accountant._privacy_budget.epsilon = Fraction(1)
    assert wrapped.evaluate(Query("count"), PureDPBudget(Fraction(1, 4))) == "noisy count"
    (admitted,) = wrapped.invocations
    assert admitted.id != cancelled.value.invocation.id
    # a restarted script: the cancelled attempt is skipped, the admitted one replayed (settled:
    # measured again with fresh noise, not charged again)
    again = adapter.OdometerSession(client, ds, FakeSession(Fraction(1)), run="race")
    assert again.evaluate(Query("count"), PureDPBudget(Fraction(1, 4))) == "noisy count"
    assert again.invocations[0].id == admitted.id
    kinds = [e.kind for e in client.ledger(ds) if e.kind.startswith("invocation_")]
    assert kinds == [
        "invocation_reserved",
        "invocation_cancelled",
        "invocation_reserved",
        "invocation_settled",
    ]
    assert client.get_dataset(ds).status["spent"] == {"epsilon": Decimal("0.25"), "delta": 0}


def test_where_nothing_can_be_cancelled_a_late_refusal_leaves_the_charge_standing(
    client: OdometerClient,
) -> None:
    """A zcdp dataset admits an ODP registration as accepted: the plain declaration is sent,
    and the Session's refusal after it leaves the charge standing."""
    ds = client.create_dataset("tumult-fake-zcdp", "10", "0.000001", accounting={"mode": "zcdp"})
    session = FakeSession(Fraction(1))
    wrapped = adapter.OdometerSession(Racing(client, session), ds, session, run="race")
    assert not wrapped.reserves
    with pytest.raises(adapter.ChargedNotMeasured, match="the charge stands"):
        wrapped.evaluate(Query("count"), PureDPBudget(Fraction(1, 4)))
    assert session.measured == []
    assert wrapped.invocations == []
    kinds = [e.kind for e in client.ledger(ds) if e.kind.startswith("invocation_")]
    assert kinds == ["invocation_accepted"]
    assert client.get_dataset(ds).status["spent"]["rho"] > 0


def test_the_session_is_imported_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tmlt.analytics", None)  # not importable, even where it is
    with pytest.raises(ImportError, match=r"needs Tumult Analytics: pip install tmlt\.analytics"):
        adapter.OdometerSession.from_dataframe(
            None, "ds", PureDPBudget(1), "visits", None, None, run="r"
        )
