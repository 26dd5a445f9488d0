"""Replay an organisation cap's decisions from its datasets' ledgers, in their order.

A cap is one filter over every invocation on every dataset of its organisation, so its state
depends on the order of invocations across datasets (dead orders in ``rdp``, every decision in
any mode). Each ledger entry that touches the cap records, in its ``org`` part:

- ``seq``: the organisation sequence number, 1, 2, … across the organisation's datasets;
- ``config`` and ``before``: the first time after the cap was set or changed, the cap filter's
  configuration (stored under ``add_remove``) and its state before this entry;
- ``replaced``: with them, the first time after a cap that had counted was replaced, the
  closed phase (its mode, its certified reading then, the last ``seq`` it counted): the replay
  checks that it equals the replayed reading of the replaced cap and that the new cap starts
  from nothing; the organisation's statement is the closed phases' sum plus the reading of
  the cap in force (``docs/accounting.md``, *Cap replacement*);
- ``outcome``, ``applied``, ``charge``, ``refund``, ``state``: as for every level.

:func:`replay_organisation` takes every dataset's whole ledger (each as exported, hash chains
checked by :func:`~odometer_core.ledger.replay.replay`), orders the ``org`` parts by ``seq``
and re-decides each one: ``admit`` of the entry's declaration under its dataset's relation for
an invocation, ``settle`` / ``cancel`` of its reservation for a finish. A change of the cap
between two entries must continue from the counted state (:func:`~odometer_core.accounting.
levels.change_cap`): the same state, and after the first count the same mode and, in a curve
mode, the thresholds fixed at creation (``change_budget`` of the last configuration to the new
target must give the recorded configuration). A missing ``seq`` means a dataset's ledger is
missing. Entries written before caps had a sequence carry no ``seq`` and are not replayed here
(their charges are checked by each dataset's replay only).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from typing import Any

from odometer_core.accounting import (
    AccountingConfig,
    FilterState,
    Reservation,
    admit,
    cancel,
    change_budget,
    config_from_json,
    config_to_json,
    fmt,
    initial_state,
    parse_declaration,
    settle,
    state_from_json,
    state_to_json,
    status,
)
from odometer_core.accounting.amounts import amount_json
from odometer_core.accounting.json_types import (
    ClosedPhaseJSON,
    DrawnJSON,
    OdometerReading,
    OrganisationVerdictJSON,
    StateJSON,
    StatementJSON,
)
from odometer_core.accounting.levels import (
    ClosedPhase,
    closed_statement,
    statement_sum,
    under_relation,
)
from odometer_core.accounting.modes import first_ladder
from odometer_core.accounting.modes.common import ConfigError, InvalidTransition
from odometer_core.accounting.modes.split import SplitConfig
from odometer_core.ledger.entry import EntryKind

_ADMISSIONS = frozenset(
    {EntryKind.INVOCATION_ACCEPTED, EntryKind.INVOCATION_RESERVED, EntryKind.INVOCATION_REJECTED}
)
_FINISHES = frozenset({EntryKind.INVOCATION_SETTLED, EntryKind.INVOCATION_CANCELLED})


@dataclass(frozen=True, slots=True)
class OrganisationVerdict:
    """The result of :func:`replay_organisation`: ``ok`` iff no problem was found."""

    ok: bool
    decisions: int
    state: StateJSON | None
    odometer: OdometerReading | None
    problems: list[str] = field(default_factory=list)
    #: per dataset: its decisions at the cap, those admitted, and what it drew (charges less
    #: refunds, in the cap's currency; :class:`Drawn`), since the cap's filter was last made
    #: anew
    datasets: dict[str, DrawnJSON] = field(default_factory=dict)
    #: the caps replaced after they counted, each with its statement checked against the
    #: replayed reading when it was replaced (:class:`~odometer_core.accounting.levels.
    #: ClosedPhase`), oldest first
    closed: list[ClosedPhaseJSON] = field(default_factory=list)
    #: the organisation's statement: the closed phases' (ε, δ) plus the replayed reading of
    #: the cap in force (basic composition of the phases; :func:`~odometer_core.accounting.
    #: levels.statement_sum`); ``None`` when nothing was replayed
    statement: StatementJSON | None = None

    def to_json(self) -> OrganisationVerdictJSON:
        return {
            "ok": self.ok,
            "decisions": self.decisions,
            "state": self.state,
            "odometer": self.odometer,
            "problems": self.problems,
            "datasets": self.datasets,
            "closed": self.closed,
            "statement": self.statement,
        }


@dataclass
class Drawn:
    """What one dataset drew from the cap: Σ charges − Σ refunds of its parts, field by field
    (scalars as exact decimals, an ``rdp`` curve order by order), and its decisions."""

    decisions: int = 0
    admitted: int = 0
    scalars: dict[str, Decimal] = field(default_factory=dict)
    curve: list[float] | None = None
    orders: list[str] | None = None

    def add(self, amount: Mapping[str, Any] | None, sign: int) -> None:
        for name, value in (amount or {}).items():
            if name == "rdp":
                values = [sign * float(v) for v in value]
                before = self.curve or [0.0] * len(values)
                # rounded up after each step: what a dataset drew is never shown below the sum
                self.curve = [
                    math.nextafter(a + b, math.inf) for a, b in zip(before, values, strict=True)
                ]
            elif name == "orders":
                self.orders = list(value)
            else:
                with localcontext() as exact:
                    exact.prec = 200
                    self.scalars[name] = self.scalars.get(name, Decimal(0)) + sign * Decimal(value)

    def to_json(self) -> DrawnJSON:
        drawn: dict[str, Any] = {name: fmt(value) for name, value in self.scalars.items()}
        if self.curve is not None:
            drawn["orders"] = self.orders
            drawn["rdp"] = [repr(max(v, 0.0)) for v in self.curve]
        return {"decisions": self.decisions, "admitted": self.admitted, "drawn": drawn}


class _Mismatch(Exception):
    pass


def _expect(what: str, recomputed: object, stored: object) -> None:
    if recomputed != stored:
        raise _Mismatch(f"{what}: recomputed {recomputed!r}, stored {stored!r}")


@dataclass(frozen=True, slots=True)
class _Step:
    seq: int
    dataset: str
    relation: str
    entry: Mapping[str, Any]


def _ledger_steps(entries: Iterable[Mapping[str, Any]], up_to: int | None) -> Iterator[_Step]:
    """One dataset's entries that touched the cap (up to organisation ``seq`` ``up_to``), with
    its relation, in their order: the organisation's numbers rise along a dataset's ledger."""
    stream = iter(entries)
    created = next(stream, None)
    if created is None:
        return
    if created.get("kind") != EntryKind.DATASET_CREATED:
        raise _Mismatch("a ledger does not start with dataset_created")
    relation = created["config"]["relation"]
    dataset = str(created.get("dataset_id"))
    last = 0
    for entry in stream:
        part = entry.get("org")
        if not isinstance(part, Mapping) or "seq" not in part:
            continue
        seq = int(part["seq"])
        if up_to is not None and seq > up_to:
            return
        if seq <= last:
            raise _Mismatch(f"organisation seq {seq} follows {last} in dataset {dataset}")
        last = seq
        yield _Step(seq, dataset, relation, entry)


def _steps(ledgers: Iterable[Iterable[Mapping[str, Any]]], up_to: int | None) -> Iterator[_Step]:
    """Every entry that touched the cap, in organisation order: the datasets' ledgers merged
    as they are read (memory grows with the number of datasets, not of entries)."""
    expected = 1
    merged = heapq.merge(*(_ledger_steps(e, up_to) for e in ledgers), key=lambda s: s.seq)
    for step in merged:
        if step.seq < expected:
            raise _Mismatch(f"organisation seq {step.seq} appears twice")
        if step.seq > expected:
            raise _Mismatch(
                f"organisation seq {expected} is missing (next is {step.seq}): a dataset's "
                "ledger is missing or incomplete"
            )
        expected += 1
        yield step


def _continue(
    config: AccountingConfig, state: FilterState, new: AccountingConfig, before: FilterState
) -> None:
    """A cap change between two entries continues from the counted state."""
    if state == initial_state(config):
        _expect("state before a new cap", state_to_json(initial_state(new)), state_to_json(before))
        return
    _expect("the cap's mode (fixed once it counted something)", config.mode, new.mode)
    try:
        changed, after = change_budget(config, state, new.epsilon, new.delta, recorded=True)
    except (InvalidTransition, ConfigError) as exc:
        raise _Mismatch(f"a cap change the rule refuses: {exc}") from exc
    if config.mode != "basic":  # the thresholds fixed at creation stay
        _expect("cap configuration after a change", config_to_json(changed), config_to_json(new))
    _expect("state after a cap change", state_to_json(after), state_to_json(before))


def _replaced(
    config: AccountingConfig | None,
    state: FilterState | None,
    new: AccountingConfig,
    before: FilterState,
    step: _Step,
) -> ClosedPhase:
    """A cap replaced (:func:`~odometer_core.accounting.levels.replace_cap`) just before this
    entry: the new cap starts from nothing, and the closed statement recorded is the replayed
    reading of the cap it replaced, which counted up to the previous organisation number. When
    nothing was replayed before (entries written before caps had a sequence number), the
    statement is taken as recorded, as the first configuration's ``before`` is."""
    recorded = step.entry["org"]["replaced"]
    phase = ClosedPhase.from_json(recorded)
    _expect("the closed phase's form", phase.to_json(), recorded)
    _expect("the closed phase's last seq", step.seq - 1, phase.after_seq)
    _expect("state of a replacing cap", state_to_json(initial_state(new)), state_to_json(before))
    if config is not None and state is not None:
        replayed = closed_statement(config, state, step.seq - 1).to_json()
        _expect("the closed statement of the replaced cap", replayed, phase.to_json())
    return phase


def _decide(
    config: AccountingConfig, state: FilterState, step: _Step
) -> tuple[FilterState, dict[str, Any]]:
    """Re-decide one entry at the cap; the recomputed part's fields to compare."""
    entry, kind = step.entry, step.entry.get("kind")
    part: Mapping[str, Any] = entry["org"]
    cfg = under_relation(config, step.relation)
    request: Mapping[str, Any] = entry.get("request") or {}
    if kind in _ADMISSIONS:
        conversion = request.get("conversion_delta")
        decision = admit(
            cfg,
            state,
            parse_declaration(entry["declaration"]),
            conversion_delta=None if conversion is None else Decimal(conversion),
        )
        applied = bool(part.get("applied"))
        if applied and not decision.admitted:
            raise _Mismatch("applied at the cap, which refuses it")
        new = decision.state if applied else state
        return new, {
            "outcome": decision.outcome,
            "charge": amount_json(decision.charge) if applied else None,
            "requested": amount_json(decision.requested),
            "state": state_to_json(new),
        }
    if kind in _FINISHES:
        reservation = Reservation.from_json({**entry["reservation"], "sub_budget": None})
        if kind == EntryKind.INVOCATION_SETTLED:
            decision = settle(cfg, state, reservation, request["cell"])
        else:
            decision = cancel(cfg, state, reservation)
        return decision.state, {
            "charge": amount_json(decision.charge),
            "refund": amount_json(decision.refund),
            "state": state_to_json(decision.state),
        }
    raise _Mismatch(f"an entry of kind {kind!r} touched the cap")


def replay_organisation(
    ledgers: Iterable[Iterable[Mapping[str, Any]]], *, up_to: int | None = None
) -> OrganisationVerdict:
    """Replay the cap's decisions recorded in ``ledgers`` (every dataset of the organisation,
    each in ``seq`` order from its ``dataset_created``: whole, or only its entries with an
    ``org`` part; read lazily) in their organisation order, up to organisation ``seq``
    ``up_to`` (``None``: all; a service reading ledgers while others write passes the
    ``cap_seq`` it read first); the first problem stops it."""
    config: AccountingConfig | None = None
    state: FilterState | None = None
    done = 0
    drawn: dict[str, Drawn] = {}
    closed: list[ClosedPhase] = []
    try:
        steps = _steps(ledgers, up_to)
        for step in steps:
            part: Mapping[str, Any] = step.entry["org"]
            try:
                if "config" in part:
                    new = config_from_json(part["config"])
                    if isinstance(new, SplitConfig):
                        raise _Mismatch("a cap is a leaf filter")
                    before = state_from_json(new, part["before"])
                    if "replaced" in part:
                        closed.append(_replaced(config, state, new, before, step))
                    elif config is not None and state is not None:
                        _continue(config, state, new, before)
                    if before == initial_state(new):  # a new filter: nothing drawn from it yet
                        drawn.clear()
                    config, state = new, before
                if config is None or state is None:
                    raise _Mismatch("no cap configuration recorded before this entry")
                with first_ladder.recorded(part):  # a shape chosen within float noise
                    state, recomputed = _decide(config, state, step)
                for name, value in recomputed.items():
                    _expect(name, value, part.get(name))
                mine = drawn.setdefault(step.dataset, Drawn())
                mine.decisions += 1
                if step.entry.get("kind") in _ADMISSIONS and part.get("applied"):
                    mine.admitted += 1
                mine.add(part.get("charge"), 1)
                mine.add(part.get("refund"), -1)
            except _Mismatch as exc:
                raise _Mismatch(
                    f"organisation seq {step.seq} (dataset {step.dataset}, "
                    f"entry {step.entry.get('seq')}): {exc}"
                ) from exc
            done += 1
    except (_Mismatch, KeyError, ValueError, TypeError) as exc:
        return OrganisationVerdict(False, done, None, None, [str(exc)])
    datasets = {name: d.to_json() for name, d in drawn.items()}
    if config is None or state is None:
        return OrganisationVerdict(True, 0, None, None, datasets=datasets)
    reading = status(config, state).get("odometer")
    return OrganisationVerdict(
        True,
        done,
        state_to_json(state),
        reading,
        datasets=datasets,
        closed=[p.to_json() for p in closed],
        statement=statement_sum(closed, config, state),
    )


__all__ = ["OrganisationVerdict", "replay_organisation"]
