"""The Tumult Analytics adapter against a served app, with the real library (tmlt.analytics
0.21, Spark local mode): queries registered one by one before they are measured (on a ``basic``
dataset as reservations, settled once measured); a query the odometer refuses is not measured;
a query the Session can be seen to refuse is never registered, and one it refuses after the
registration has its reservation cancelled; a protected change that the dataset's relation does
not charge for is refused; ``RhoZCDPBudget`` is declared as ``zcdp``; a retried script is
charged once. One Spark session for the module (its start is
most of the time). Skipped where ``tmlt.analytics`` is not importable (the project's venv):
``make test-tumult`` runs them in ``.venv-tumult``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from odometer_client import OdometerClient

ROOT = Path(__file__).resolve().parents[2]

analytics = pytest.importorskip("tmlt.analytics")

from odometer_client.adapters import tumult as adapter  # noqa: E402

# Spark's and pandas' own warnings (pandas UDF type hints, deprecations in pyspark) are not
# this adapter's; the suite turns warnings into errors
pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

Session = analytics.Session
QueryBuilder = analytics.QueryBuilder
KeySet = analytics.KeySet
PureDPBudget = analytics.PureDPBudget
ApproxDPBudget = analytics.ApproxDPBudget
RhoZCDPBudget = analytics.RhoZCDPBudget
AddOneRow = analytics.AddOneRow


@pytest.fixture(scope="module")
def visits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark DataFrame of 40 visits (user, region, minutes), on one local Spark session
    (its warehouse, where Tumult keeps its temporary tables, in a temporary directory rather
    than the working directory)."""
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    pd = importlib.import_module("pandas")  # Tumult's venv only: imported by name for mypy
    builder = importlib.import_module("pyspark.sql").SparkSession.builder
    spark = (
        builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .getOrCreate()
    )
    frame = pd.DataFrame(
        {
            "user": list(range(40)),
            "region": [f"r{i % 3}" for i in range(40)],
            "minutes": [i % 7 for i in range(40)],
        }
    )
    yield spark.createDataFrame(frame)
    spark.stop()


class Measured:
    """Counts the measurements a Session's accountant runs (each one draws noise)."""

    def __init__(self, session: Any) -> None:
        self.count = 0
        accountant = session._accountant
        real = accountant.measure

        def measure(*args: Any, **kwargs: Any) -> Any:
            out = real(*args, **kwargs)  # refuses (raises) before drawing noise, or measures
            self.count += 1
            return out

        accountant.measure = measure


def _registrations(client: OdometerClient, ds: Any) -> list[Any]:
    """The dataset's ledger entries of registrations, settles and cancels."""
    return [e for e in client.ledger(ds) if e.kind.startswith("invocation_")]


#: what a query measured on a ``basic`` dataset leaves in its ledger
MEASURED = ["invocation_reserved", "invocation_settled"]


def _session(budget: Any, df: Any, change: Any = None) -> Any:
    return Session.from_dataframe(budget, "visits", df, change or AddOneRow())


COUNT = QueryBuilder("visits").count()
PER_REGION = QueryBuilder("visits").groupby(KeySet.from_dict({"region": ["r0", "r1", "r2"]}))


def test_queries_are_registered_one_by_one_before_they_are_measured(
    tumult_client: OdometerClient, visits: Any
) -> None:
    client = tumult_client
    ds = client.create_dataset("tumult-pure", "1", "0.000001")
    wrapped = adapter.OdometerSession(client, ds, _session(PureDPBudget(1), visits), run="pure")
    measured = Measured(wrapped.session)

    total = wrapped.evaluate(COUNT, PureDPBudget(0.25))
    assert measured.count == 1
    assert total.columns == ["count"]
    first = _registrations(client, ds)
    assert [e.kind for e in first] == MEASURED

    regions = wrapped.evaluate(PER_REGION.sum("minutes", 0, 6), PureDPBudget(0.5))
    assert measured.count == 2
    assert sorted(r["region"] for r in regions.collect()) == ["r0", "r1", "r2"]
    assert [e.kind for e in _registrations(client, ds)] == MEASURED * 2

    # declared exactly as the budgets the Session charged, registered as reservations of them
    declared = [d.to_json() for d in wrapped.declarations]
    assert declared == [
        {"type": "pure_dp", "epsilon": "0.25"},
        {"type": "pure_dp", "epsilon": "0.5"},
    ]
    assert [d.to_json()["cells"] for d in wrapped.registered] == [
        [{"name": "measured", "epsilon": e}, {"name": "not_measured", "epsilon": e}]
        for e in ("0.25", "0.5")
    ]
    charged = [e.charge["epsilon"] for e in _registrations(client, ds)]
    assert charged == ["0.25", "0.25", "0.5", "0.5"]  # reserved, settled; reserved, settled
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.75")
    assert wrapped.remaining_privacy_budget == PureDPBudget(0.25)


def test_a_query_the_odometer_refuses_is_not_measured(
    tumult_client: OdometerClient, visits: Any
) -> None:
    client = tumult_client
    ds = client.create_dataset("tumult-small", "0.5", "0.000001")
    wrapped = adapter.OdometerSession(client, ds, _session(PureDPBudget(2), visits), run="small")
    measured = Measured(wrapped.session)
    wrapped.evaluate(COUNT, PureDPBudget(0.375))
    assert measured.count == 1

    with pytest.raises(adapter.QueryRefused) as refused:
        wrapped.evaluate(PER_REGION.count(), PureDPBudget(0.25))
    assert refused.value.status_code == 409
    message = str(refused.value)
    assert message.startswith("the odometer refused the query, so nothing was measured: ")
    assert refused.value.summary is not None and refused.value.summary["text"] in message
    assert refused.value.declared.to_json() == {"type": "pure_dp", "epsilon": "0.25"}
    # nothing measured: no noise drawn, the Session's own budget untouched
    assert measured.count == 1
    assert wrapped.remaining_privacy_budget == PureDPBudget(1.625)
    kinds = [e.kind for e in _registrations(client, ds)]
    assert kinds == [*MEASURED, "invocation_rejected"]
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.375")


def test_a_query_the_session_refuses_is_never_registered(
    tumult_client: OdometerClient, visits: Any
) -> None:
    client = tumult_client
    ds = client.create_dataset("tumult-session-refuses", "1", "0.000001")
    wrapped = adapter.OdometerSession(client, ds, _session(PureDPBudget(0.5), visits), run="local")
    measured = Measured(wrapped.session)
    with pytest.raises(adapter.SessionRefused, match="nothing was sent to the odometer"):
        wrapped.evaluate(COUNT, PureDPBudget(0.8))
    # a budget type the Session was not made with: its compile step refuses it, nothing sent
    with pytest.raises(ValueError, match="must match the type"):
        wrapped.evaluate(COUNT, RhoZCDPBudget(0.1))
    assert measured.count == 0
    assert _registrations(client, ds) == []
    assert client.get_dataset(ds).status["spent"]["epsilon"] == 0
    # the odometer's budget is whole: the Session's remaining 0.5 is still admitted
    wrapped.evaluate(COUNT, PureDPBudget(0.5))
    assert measured.count == 1
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.5")


def test_a_query_the_session_refuses_after_the_registration_is_cancelled(
    tumult_client: OdometerClient, visits: Any
) -> None:
    """The Session refuses after the registration (its budget was spent between the check and
    the measurement): the reservation is cancelled, nothing is charged or measured."""
    client = tumult_client
    ds = client.create_dataset("tumult-race", "1", "0.000001")
    session = _session(PureDPBudget(0.5), visits)

    class Racing:
        """A client whose registration lets another caller spend the Session meanwhile."""

        def get_dataset(self, dataset: Any) -> Any:
            return client.get_dataset(dataset)

        def register(self, *args: Any, **kwargs: Any) -> Any:
            invocation = client.register(*args, **kwargs)
            session.evaluate(COUNT, PureDPBudget(0.5))
            return invocation

        def __getattr__(self, name: str) -> Any:  # get_invocation, settle, cancel
            return getattr(client, name)

    wrapped = adapter.OdometerSession(Racing(), ds, session, run="race")
    measured = Measured(session)
    with pytest.raises(adapter.RegistrationCancelled) as refused:
        wrapped.evaluate(COUNT, PureDPBudget(0.375))
    message = str(refused.value)
    assert "was cancelled, nothing is charged and nothing was measured" in message
    assert measured.count == 1  # the other caller's query, not this one
    # nothing is spent or reserved, the reading is 0; the ledger shows the reservation and its
    # cancel
    status = client.get_dataset(ds).status
    assert status["odometer"]["epsilon"] == 0
    assert status["spent"] == {"epsilon": 0, "delta": 0} and status["reserved"]["epsilon"] == 0
    kinds = [e.kind for e in _registrations(client, ds)]
    assert kinds == ["invocation_reserved", "invocation_cancelled"]
    assert refused.value.settlement.status == "cancelled"
    assert refused.value.settlement.refund == {"epsilon": Decimal("0.375"), "delta": 0}
    assert wrapped.invocations == [] and wrapped.cancelled == [refused.value.invocation]


def test_a_protected_change_the_relation_does_not_charge_for_is_refused(
    tumult_client: OdometerClient, visits: Any
) -> None:
    client = tumult_client
    replace = client.create_dataset("tumult-replace", "1", "0.000001", relation="replace_one")
    with pytest.raises(adapter.RelationMismatch, match="'replace_one'"):
        adapter.OdometerSession(client, replace, _session(PureDPBudget(1), visits), run="r")
    add_remove = client.create_dataset("tumult-ids", "1", "0.000001")
    by_user = _session(PureDPBudget(1), visits, analytics.AddRowsWithID("user"))
    with pytest.raises(adapter.RelationMismatch, match="AddRemoveKeys"):
        adapter.OdometerSession(client, add_remove.id, by_user, run="ids")
    # rows, by up to 2 at a time: the Session's ε holds for one row, as add_remove charges
    two_rows = _session(PureDPBudget(1), visits, analytics.AddMaxRows(2))
    wrapped = adapter.OdometerSession(client, add_remove.id, two_rows, run="rows")
    wrapped.evaluate(COUNT, PureDPBudget(0.5))
    assert [d.to_json() for d in wrapped.declarations] == [{"type": "pure_dp", "epsilon": "0.5"}]
    assert _registrations(client, replace) == []


def test_rho_zcdp_budgets_are_declared_as_zcdp(tumult_client: OdometerClient, visits: Any) -> None:
    client = tumult_client
    ds = client.create_dataset("tumult-zcdp", "10", "0.000001", accounting={"mode": "zcdp"})
    wrapped = adapter.OdometerSession(client, ds, _session(RhoZCDPBudget(0.5), visits), run="z")
    wrapped.evaluate(COUNT, RhoZCDPBudget(0.125))
    # ρ = 0.03 is the binary float's exact value (below 0.03), read up to 17 digits
    wrapped.evaluate(PER_REGION.count(), RhoZCDPBudget(0.03))
    exact = Fraction(0.03)
    rho = Decimal("0.029999999999999999")
    assert Fraction(rho) >= exact > Fraction(rho) - Fraction(1, 10**18)
    assert [d.to_json() for d in wrapped.declarations] == [
        {"type": "zcdp", "rho": "0.125"},
        {"type": "zcdp", "rho": str(rho)},
    ]
    spent = client.get_dataset(ds).status["spent"]
    assert spent["rho"] == Decimal("0.125") + rho


def test_approximate_budgets_are_declared_as_approx_dp(
    tumult_client: OdometerClient, visits: Any
) -> None:
    client = tumult_client
    ds = client.create_dataset("tumult-approx", "1", "0.000001")
    wrapped = adapter.OdometerSession(
        client, ds, _session(ApproxDPBudget(1, 1e-6), visits), run="approx"
    )
    wrapped.evaluate(COUNT, ApproxDPBudget(0.5, 1e-7))
    # a pure budget in an approximate Session is (ε, 0) to it: declared as pure ε
    wrapped.evaluate(COUNT, PureDPBudget(0.25))
    declared, pure = [d.to_json() for d in wrapped.declarations]
    assert pure == {"type": "pure_dp", "epsilon": "0.25"}
    assert declared["type"] == "approx_dp" and declared["epsilon"] == "0.5"
    # the float 1e-7 is 9.99999999999999954748…e-8: read up to 17 digits
    delta = Decimal(declared["delta"])
    assert delta == Decimal("9.9999999999999996E-8")
    assert Fraction(delta) - Fraction(1, 10**24) < Fraction(1e-7) <= Fraction(delta)
    assert client.get_dataset(ds).status["spent"]["delta"] == delta


def _per_region_count() -> Any:
    """The query as a restarted script builds it again: new objects, a new KeySet."""
    keys = KeySet.from_dict({"region": ["r0", "r1", "r2"]})
    return QueryBuilder("visits").groupby(keys).count()


def test_a_retried_script_is_charged_once(tumult_client: OdometerClient, visits: Any) -> None:
    client = tumult_client
    ds = client.create_dataset("tumult-retry", "1", "0.000001")
    first = adapter.OdometerSession(client, ds, _session(PureDPBudget(1), visits), run="retry")
    query = _per_region_count()
    first.evaluate(query, PureDPBudget(0.625))
    # the script restarts: a new Session, the same query built again, the same label (the
    # query's repr names its KeySet by address, which differs: the key reads the keys' rows)
    again_query = _per_region_count()
    assert repr(again_query._query_expr) != repr(query._query_expr)
    again = adapter.OdometerSession(client, ds, _session(PureDPBudget(1), visits), run="retry")
    again.evaluate(again_query, PureDPBudget(0.625))
    assert again.invocations[0].id == first.invocations[0].id
    assert [e.kind for e in _registrations(client, ds)] == MEASURED
    assert client.get_dataset(ds).status["spent"]["epsilon"] == Decimal("0.625")
    # a new label is a new release: 0.625 more does not fit, and nothing is measured
    other = adapter.OdometerSession(client, ds, _session(PureDPBudget(1), visits), run="second")
    measured = Measured(other.session)
    with pytest.raises(adapter.QueryRefused):
        other.evaluate(_per_region_count(), PureDPBudget(0.625))
    assert measured.count == 0


def test_the_example_runs(
    tumult_server: str, tumult_admin_key: str, visits: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ROOT / "examples" / "tumult_regions.py"
    spec = importlib.util.spec_from_file_location("examples_tumult_regions", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = example.main(["--url", tumult_server, "--key", tumult_admin_key], visits.sparkSession)
    assert out["declarations"] == [
        {"type": "pure_dp", "epsilon": "0.5"},
        {"type": "pure_dp", "epsilon": "0.25"},
    ]
    assert out["spent"] == Decimal("0.75")
    assert sorted(out["released"]) == ["region-0", "region-1", "region-2", "total"]
    assert out["refused"].startswith("the odometer refused the query, so nothing was measured")
    assert out["left"] == PureDPBudget(1.25)  # the refused sum and the too-large count: unspent
    printed = capsys.readouterr().out
    assert "released total" in printed and "the Session refused, nothing sent" in printed
