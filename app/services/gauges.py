"""Budget gauges: the status of the datasets an operator listed, exported by ``/metrics``.

``ODOMETER_METRICS_DATASETS`` lists datasets by id or exact name (at most
:data:`~app.settings.MAX_METRICS_DATASETS`: the series stay bounded). At every scrape,
:class:`BudgetGauges` reads their status in one short read-only transaction
(:func:`read_budgets`), built as ``GET /v1/datasets/{id}`` builds it
(:func:`app.services.datasets.dataset_view`: no accounting here), and exports its exact decimal
figures as floats. The figures come from the database, so every worker process exports the same
values; the scrape's own health (``odometer_metrics_budget_*``) is the process's. A scrape whose
read fails still answers: the budget series are left out (never stale), ``…_budget_up`` is 0
and ``…_budget_scrape_errors_total`` counts the failure. ``docs/operations.md``, *Budget
gauges*.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Select, select
from sqlalchemy.orm import InstrumentedAttribute

from app.db.models import Dataset
from app.db.uow import Database, UnitOfWork
from app.services import blocks
from app.services._aggregate import load_filter
from app.services.datasets import DatasetView, dataset_view

log = logging.getLogger("odometer")

#: The labels of every per-dataset series.
LABELS = ("dataset_id", "dataset_name", "organisation")


@dataclass(frozen=True, slots=True)
class BudgetReading:
    """What one scrape read: the views of the listed datasets found (each once, in the order
    listed), and how many references found none, or several (a name shared by datasets)."""

    views: list[DatasetView]
    missing: int
    ambiguous: int


def read_budgets(uow: UnitOfWork, refs: Sequence[str]) -> BudgetReading:
    """The status of the datasets ``refs`` name (by id, else by exact name), in one read-only
    transaction. A name several datasets share names none of them (give an id)."""
    with uow.read_only():
        by_id = {ds.id: ds for ds in uow.session.scalars(_listed(Dataset.id, refs))}
        names = [ref for ref in refs if ref not in by_id]
        by_name: dict[str, list[Dataset]] = {}
        if names:
            for ds in uow.session.scalars(_listed(Dataset.name, names)):
                by_name.setdefault(ds.name, []).append(ds)
        found: dict[str, Dataset] = {}
        missing = ambiguous = 0
        for ref in refs:
            named = [by_id[ref]] if ref in by_id else by_name.get(ref, [])
            if len(named) == 1:
                found.setdefault(named[0].id, named[0])
            elif named:
                ambiguous += 1
            else:
                missing += 1
        views = []
        for ds in found.values():
            # as app.services.datasets.get_dataset builds a dataset's view (without the count
            # of more declarations like the last, which is not exported)
            config, state = load_filter(ds)
            views.append(dataset_view(ds, config, state, blocks.partition_status(uow, ds, config)))
    return BudgetReading(views, missing, ambiguous)


def _listed(column: InstrumentedAttribute[str], values: Sequence[str]) -> Select[Dataset]:
    """The datasets whose ``column`` is one of ``values`` (by id: the primary key; by name: a
    scan of the datasets, only for references that are not ids), oldest first."""
    return select(Dataset).where(column.in_(values)).order_by(Dataset.created_at, Dataset.id)


class BudgetGauges(Collector):
    """The Prometheus collector of the listed datasets' budgets (read at scrape time)."""

    def __init__(self, database: Database, refs: Sequence[str]) -> None:
        self.database = database
        self.refs = tuple(refs)
        self._lock = threading.Lock()
        self._errors = 0

    def describe(self) -> Iterable[Metric]:
        """The families, without samples (the registry asks once, when this is registered:
        no database read then)."""
        return list(_Families().all())

    def collect(self) -> Iterable[Metric]:
        start = time.perf_counter()
        try:
            reading: BudgetReading | None = read_budgets(UnitOfWork(self.database), self.refs)
        except Exception:  # a scrape answers even when the database does not
            log.warning("budget gauges: the datasets' status could not be read", exc_info=True)
            reading = None
        seconds = time.perf_counter() - start
        with self._lock:
            if reading is None:
                self._errors += 1
            errors = self._errors
        families = _Families()
        families.listed.add_metric([], len(self.refs))
        families.up.add_metric([], 0 if reading is None else 1)
        families.errors.add_metric([], errors)
        families.seconds.add_metric([], seconds)
        if reading is not None:
            families.missing.add_metric([], reading.missing)
            families.ambiguous.add_metric([], reading.ambiguous)
            for view in reading.views:
                families.add(view)
        return list(families.all())


class _Families:
    """One scrape's metric families."""

    def __init__(self) -> None:
        def per_dataset(name: str, documentation: str, *extra: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, documentation, labels=[*LABELS, *extra])

        self.budget_epsilon = per_dataset(
            "odometer_dataset_budget_epsilon", "The dataset's target ε (status.budget.epsilon)"
        )
        self.budget_delta = per_dataset(
            "odometer_dataset_budget_delta", "The dataset's target δ (status.budget.delta)"
        )
        self.certified_epsilon = per_dataset(
            "odometer_dataset_certified_epsilon",
            "The certified odometer reading's ε (status.odometer.epsilon)",
        )
        self.certified_delta = per_dataset(
            "odometer_dataset_certified_delta",
            "The certified odometer reading's δ (status.odometer.delta)",
        )
        self.ledger_seq = per_dataset(
            "odometer_dataset_ledger_seq", "The sequence number of the ledger's head entry"
        )
        self.open_reservations = per_dataset(
            "odometer_dataset_open_reservations",
            "Open ODP reservations (status.reserved.open; split: over the sub-budgets)",
        )
        self.left_fraction = per_dataset(
            "odometer_dataset_left_fraction",
            "What is left over the budget, per unit of the mode (status.summary.left[].fraction)",
            "unit",
            "sub_budget",
        )
        self.listed = GaugeMetricFamily(
            "odometer_metrics_datasets_listed", "Datasets ODOMETER_METRICS_DATASETS lists"
        )
        self.missing = GaugeMetricFamily(
            "odometer_metrics_datasets_missing",
            "Listed datasets no dataset answers to (by id or name): not exported",
        )
        self.ambiguous = GaugeMetricFamily(
            "odometer_metrics_datasets_ambiguous",
            "Listed names several datasets share: none of them exported (list an id)",
        )
        self.up = GaugeMetricFamily(
            "odometer_metrics_budget_up",
            "Whether this scrape read the listed datasets' status (0: the read failed)",
        )
        self.errors = CounterMetricFamily(
            "odometer_metrics_budget_scrape_errors",
            "Scrapes of this process whose read of the datasets' status failed",
        )
        self.seconds = GaugeMetricFamily(
            "odometer_metrics_budget_scrape_seconds",
            "How long this scrape's read of the datasets' status took",
        )

    def all(self) -> Iterator[Metric]:
        yield from vars(self).values()

    def add(self, view: Mapping[str, Any]) -> None:
        """The series of one dataset's view (a figure its status lacks is left out)."""
        labels = [str(view["id"]), str(view["name"]), str(view["organisation"])]
        status: Mapping[str, Any] = view["status"]
        budget = _mapping(status.get("budget"))
        reading = _mapping(status.get("odometer"))
        for family, value in (
            (self.budget_epsilon, budget.get("epsilon")),
            (self.budget_delta, budget.get("delta")),
            (self.certified_epsilon, reading.get("epsilon")),
            (self.certified_delta, reading.get("delta")),
            (self.ledger_seq, _mapping(view.get("ledger")).get("last_seq")),
            (self.open_reservations, open_reservations(status)),
        ):
            number = _number(value)
            if number is not None:
                family.add_metric(labels, number)
        seen: set[tuple[str, str]] = set()
        for item in _left(status):
            key = (str(item.get("unit")), str(item.get("sub_budget") or ""))
            number = _number(item.get("fraction"))
            if number is not None and key not in seen:
                seen.add(key)
                self.left_fraction.add_metric([*labels, *key], number)


def open_reservations(status: Mapping[str, Any]) -> int | None:
    """Open reservations: the status's ``reserved.open``, summed over a split dataset's
    sub-budgets; ``None`` when no budget of the dataset has reservations (curve modes,
    partitioned datasets)."""
    counts = [
        _mapping(s.get("reserved")).get("open")
        for s in (status, *_mapping(status.get("sub_budgets")).values())
        if isinstance(s, Mapping)
    ]
    opened = [n for n in counts if isinstance(n, int)]
    return sum(opened) if opened else None


def _left(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``status.summary.left`` (empty where the status has no summary)."""
    left = _mapping(status.get("summary")).get("left")
    return [item for item in left if isinstance(item, Mapping)] if isinstance(left, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    """An exact figure (decimal text, a count) as the float Prometheus carries."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        return None
    try:
        return float(Decimal(value) if isinstance(value, str) else value)
    except (ArithmeticError, ValueError):  # not a number (decimal.InvalidOperation), sNaN
        return None
