"""A dataset's audit report (``GET /v1/datasets/{id}/report``).

The report is one streaming pass over the dataset's ledger, read in batches of
:data:`BATCH_SIZE` entries, each in its own short read transaction (like
:func:`app.services.ledger.read_ledger`), up to the head seen when the report started. Every
entry is fed to the verification (:mod:`app.services._verified`: every hash link re-checked,
the decisions re-run from the last position a clean report of this process reached) and to a
:class:`_Tally`, so memory
is bounded by the number of analysts, declaration kinds, open reservations (as the replay's),
distinct rejection reasons (capped) and series points (≤ :data:`MAX_POINTS`), never by the
length of the ledger.

Amounts stay exact: they are added as :class:`~decimal.Decimal` and returned as decimal
strings (``fmt``); only the SVG renderer turns them into coordinates.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from app.db.uow import UnitOfWork
from app.services import blocks
from app.services._aggregate import load_filter, visible_dataset
from app.services._types import JSONObject
from app.services._verified import entries_after, gc_paused, remember, verification_of
from app.services.errors import InvalidBlocks
from app.services.principals import Principal
from app.services.report_types import (
    AnalystJson,
    IdentityJson,
    MechanismJson,
    ReportJson,
    TotalsJson,
    VerdictJson,
)
from odometer_core.accounting import (
    AccountingConfig,
    config_from_json,
    fmt,
    state_from_json,
    status,
)
from odometer_core.accounting.levels import DATASET, ORGANISATION, QUOTA, reported_refusal
from odometer_core.accounting.summary import Spend, compose
from odometer_core.ledger import EntryKind
from odometer_core.ledger.replay import Replayer

#: Entries fetched per short read transaction.
#: At most this many points in the spend-over-time series.
MAX_POINTS = 500
#: Distinct rejection reasons listed; the rest are counted under :data:`OTHER_REASONS`.
MAX_REASONS = 50
OTHER_REASONS = "(other reasons)"
#: Replay problems listed in full (their total is always given).
MAX_PROBLEMS = 20
#: The scalar units a charge or refund may carry (rdp curves are counted, not summed).
UNITS = ("epsilon", "delta", "rho", "mu_squared")

_CHARGING = (EntryKind.INVOCATION_ACCEPTED, EntryKind.INVOCATION_RESERVED)
_RELEASING = (EntryKind.INVOCATION_SETTLED, EntryKind.INVOCATION_CANCELLED)


def amounts(obj: Mapping[str, Any] | None) -> dict[str, Decimal]:
    """The scalar amounts of a stored charge or refund (``epsilon``, ``delta``, ``rho``,
    ``mu_squared``); curve-valued parts (rdp) are not scalars and are left out."""
    out: dict[str, Decimal] = {}
    for unit in UNITS:
        value = (obj or {}).get(unit)
        if isinstance(value, str | int):
            try:
                out[unit] = Decimal(value)
            except InvalidOperation:
                continue
    return out


def _add(total: dict[str, Decimal], part: Mapping[str, Decimal], sign: int = 1) -> None:
    for unit, value in part.items():
        total[unit] = total.get(unit, Decimal(0)) + sign * value


def _text(total: Mapping[str, Decimal]) -> dict[str, str]:
    return {unit: fmt(total[unit]) for unit in UNITS if unit in total}


@dataclass(slots=True)
class MechanismTotals:
    """One declaration kind's totals; ``charged`` is net of refunds (open reservations
    included)."""

    charged: dict[str, Decimal] = field(default_factory=dict)
    refunded: dict[str, Decimal] = field(default_factory=dict)
    #: the same net charges per sub-budget, curves included: what ``attribution`` converts
    spend: Spend = field(default_factory=Spend)
    accepted: int = 0
    reserved: int = 0
    rejected: int = 0
    settled: int = 0
    cancelled: int = 0


@dataclass(slots=True)
class AnalystTotals(MechanismTotals):
    """What one actor spent: the same totals, and how many charges had no scalar amount."""

    curve_charges: int = 0


#: The kind a settlement or cancellation is counted under when its reservation was not seen.
UNKNOWN_KIND = "(unknown)"


@dataclass(frozen=True, slots=True)
class SpendPoint:
    """The dataset's spend right after entry ``seq`` (exact, in the series' unit)."""

    seq: int
    at: str
    spent: Decimal
    budget: Decimal
    spent_delta: Decimal
    budget_delta: Decimal
    reserved: Decimal = Decimal(0)


def reserved_measure(view: Mapping[str, Any]) -> Decimal:
    """The open reservations of a :func:`status` view in its series unit (ε: only the basic
    mode reserves, for one-shot ODP declarations; a split adds its sub-budgets'), already
    counted in :func:`spend_measure`'s ``spent``."""
    if view["mode"] == "split":
        return sum((reserved_measure(sub) for sub in view["sub_budgets"].values()), Decimal(0))
    reserved = view.get("reserved")
    if view["mode"] == "basic" and isinstance(reserved, Mapping):
        return Decimal(reserved["epsilon"])
    return Decimal(0)


def spend_measure(view: Mapping[str, Any]) -> tuple[str, Decimal, Decimal, Decimal, Decimal, bool]:
    """``(unit, spent, budget, spent δ, budget δ, certified)`` from a :func:`status` view.

    The unit is the mode's own where the budget is a scalar in it (basic: ε with open
    reservations counted, since they are charged until settled; zcdp: ρ; gdp: μ²); rdp and
    split fall back to the (ε, δ) conversion of the running totals, labelled not certified.
    """
    mode = view["mode"]
    budget = view["budget"]
    if mode == "split":
        parts = [spend_measure(sub) for sub in view["sub_budgets"].values()]
        return (
            "epsilon",
            sum((p[1] for p in parts), Decimal(0)),
            Decimal(budget["epsilon"]),
            sum((p[3] for p in parts), Decimal(0)),
            Decimal(budget["delta"]),
            all(p[5] and p[0] == "epsilon" for p in parts),
        )
    eps_delta = view["spent_eps_delta"]
    spent_delta = Decimal(eps_delta["delta"])
    if mode == "basic":
        return (
            "epsilon",
            Decimal(eps_delta["epsilon"]),
            Decimal(budget["epsilon"]),
            spent_delta,
            Decimal(budget["delta"]),
            True,
        )
    if mode == "zcdp":
        spent, total = Decimal(view["spent"]["rho"]), Decimal(view["rho_budget"])
        return ("rho", spent, total, spent_delta, Decimal(budget["delta"]), True)
    if mode == "gdp":
        spent, total = Decimal(view["spent"]["mu_squared"]), Decimal(view["mu_squared_budget"])
        return ("mu_squared", spent, total, spent_delta, Decimal(budget["delta"]), True)
    return (
        "epsilon",
        Decimal(eps_delta["epsilon"]),
        Decimal(budget["epsilon"]),
        spent_delta,
        Decimal(budget["delta"]),
        False,
    )


def rejection_level(entry: Mapping[str, Any]) -> str:
    """Which budget level's refusal an ``invocation_rejected`` entry reports: exactly the
    ``level`` of the 409 that answered it.

    What each level decided is read back from the entry: the dataset refused when the entry
    carries its charge (a refusal above the dataset records none, a dataset refusal records its
    zero charge: ``_dataset_charge`` in :mod:`app.services.invocations`; the replay checks it);
    an upper level refused when its part says ``rejected``. The reported level is then chosen
    by the one rule the registration used, :func:`~odometer_core.accounting.levels.reported_refusal`
    (the first refusal in the order dataset, organisation, quota)."""

    def refused(part: object) -> bool:
        return isinstance(part, Mapping) and part.get("outcome") == "rejected"

    level = reported_refusal(
        (
            (DATASET, entry.get("charge") is not None),
            (ORGANISATION, refused(entry.get("org"))),
            (QUOTA, refused(entry.get("quota"))),
        )
    )
    return level or DATASET


class _Tally:
    """Folds entries into the report's totals; bounded memory (see the module docstring)."""

    def __init__(self, head_seq: int) -> None:
        self.stride = max(1, math.ceil(head_seq / MAX_POINTS))
        self.head_seq = head_seq
        self.analysts: dict[str, AnalystTotals] = {}
        self.mechanisms: dict[str, MechanismTotals] = {}
        # the declaration kind of each open reservation (settle and cancel entries do not
        # repeat the declaration): bounded by the open reservations, not the ledger's length
        self._open_kinds: dict[str, tuple[str, str | None]] = {}
        self.refunds: dict[str, Decimal] = {}
        self.odp_savings: dict[str, Decimal] = {}
        self.rejections = 0
        self.by_level: Counter[str] = Counter()
        self.by_reason: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.series: list[SpendPoint] = []
        self.unit = "epsilon"
        self.certified = True
        self._config_json: Mapping[str, Any] | None = None
        self._config: AccountingConfig | None = None

    def feed(self, entry: Mapping[str, Any]) -> None:
        kind, actor = str(entry.get("kind")), str(entry.get("actor"))
        self.kinds[kind] += 1
        if isinstance(entry.get("config"), Mapping):
            self._config_json = entry["config"]
            self._config = None  # parsed lazily, only if a series point needs it
        declaration = entry.get("declaration")
        declared = str(declaration.get("type")) if isinstance(declaration, Mapping) else None
        invocation = str(entry.get("invocation_id"))
        request = entry.get("request")
        sub_budget = request.get("sub_budget") if isinstance(request, Mapping) else None
        if kind in _CHARGING:
            row = self.analysts.setdefault(actor, AnalystTotals())
            mech = self.mechanisms.setdefault(declared or UNKNOWN_KIND, MechanismTotals())
            charge = amounts(entry.get("charge"))
            for totals in (row, mech):
                _add(totals.charged, charge)
                totals.spend.add(entry.get("charge"), sub_budget)
            if "epsilon" not in charge and "rho" not in charge and "mu_squared" not in charge:
                row.curve_charges += 1
            if kind == EntryKind.INVOCATION_ACCEPTED:
                row.accepted += 1
                mech.accepted += 1
            else:
                row.reserved += 1
                mech.reserved += 1
                self._open_kinds[invocation] = (declared or UNKNOWN_KIND, sub_budget)
        elif kind in _RELEASING:
            row = self.analysts.setdefault(actor, AnalystTotals())
            held, sub_budget = self._open_kinds.pop(invocation, (UNKNOWN_KIND, sub_budget))
            mech = self.mechanisms.setdefault(held, MechanismTotals())
            refund = amounts(entry.get("refund"))
            for totals in (row, mech):
                _add(totals.charged, refund, -1)
                _add(totals.refunded, refund)
                totals.spend.add(entry.get("refund"), sub_budget, -1)
            _add(self.refunds, refund)
            if kind == EntryKind.INVOCATION_SETTLED:
                row.settled += 1
                mech.settled += 1
                _add(self.odp_savings, refund)
            else:
                row.cancelled += 1
                mech.cancelled += 1
        elif kind == EntryKind.INVOCATION_REJECTED:
            self.analysts.setdefault(actor, AnalystTotals()).rejected += 1
            self.mechanisms.setdefault(declared or UNKNOWN_KIND, MechanismTotals()).rejected += 1
            self.rejections += 1
            self.by_level[rejection_level(entry)] += 1
            reason = str(entry.get("reason") or "(no reason recorded)")
            if reason not in self.by_reason and len(self.by_reason) >= MAX_REASONS:
                reason = OTHER_REASONS
            self.by_reason[reason] += 1
        seq = int(entry.get("seq") or 0)
        if seq % self.stride == 0 or seq == self.head_seq:
            self._point(entry, seq)

    def _point(self, entry: Mapping[str, Any], seq: int) -> None:
        """The last entry of each stride-wide bucket becomes a point (≤ MAX_POINTS); a
        state that cannot be read (a corrupted ledger) gives no point, the verdict says why."""
        if self._config_json is None:
            return
        try:
            if self._config is None:
                self._config = config_from_json(self._config_json)
            view = status(self._config, state_from_json(self._config, entry["state"]))
            unit, spent, budget, spent_delta, budget_delta, certified = spend_measure(view)
            reserved = reserved_measure(view)
        except Exception:  # a corrupted entry: no point here; the replay verdict reports it
            return
        self.unit, self.certified = unit, certified
        self.series.append(
            SpendPoint(
                seq, str(entry.get("at")), spent, budget, spent_delta, budget_delta, reserved
            )
        )


#: Entries read per short read transaction.
BATCH_SIZE = 500


def _batches(uow: UnitOfWork, dataset_id: str, head: int) -> Iterator[JSONObject]:
    """Entries 1…head, in batches of :data:`BATCH_SIZE` (:func:`entries_after`)."""
    return entries_after(uow, dataset_id, 0, head, batch=BATCH_SIZE)


def _verdict(
    replayer: Replayer, head_hash: str, stored_state: Mapping[str, Any], head: int
) -> VerdictJson:
    """The replay verdict plus the checks that tie the ledger to the dataset row."""
    verdict = replayer.verdict()
    problems = list(verdict.problems)
    if verdict.entries != head:
        problems.append(f"the ledger has {verdict.entries} entries up to seq {head}")
    if verdict.head_hash != head_hash:
        problems.append("the dataset's head hash differs from the last entry's hash")
    if verdict.state != stored_state:
        problems.append("the dataset's stored state differs from the replayed state")
    return {
        "ok": not problems,
        "entries": verdict.entries,
        "head_hash": verdict.head_hash,
        "first_problem": problems[0] if problems else None,
        "problem_count": len(problems),
        "problems": problems[:MAX_PROBLEMS],
    }


def dataset_report(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    *,
    verify: bool = True,
    first: str | None = None,
    last: str | None = None,
) -> ReportJson:
    """The report of one dataset, as of its ledger head when the report started.
    ``verify=False`` skips the replay (the charts do not show it); ``verification`` is then
    ``None``. On a partitioned dataset ``first`` … ``last`` (block keys, both included; default
    every block) is the block range reported: the totals count the invocations whose
    selection meets it, ``blocks`` pages its runs (the replay still covers the whole ledger)."""
    blocks_part: blocks.BlocksPage | None = None
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        head, head_hash = ds.last_seq, ds.head_hash
        stored_state, config_json = dict(ds.state_json), dict(ds.config_json)
        partitioned = ds.partition_json is not None
        if partitioned:
            now_blocks = blocks.partition_status(uow, ds, load_filter(ds)[0])
        identity: IdentityJson = {
            "id": ds.id,
            "name": ds.name,
            "organisation": ds.organisation,
            "relation": ds.relation,
            "mode": ds.mode,
        }
    window = (0, 0)
    if partitioned:
        blocks_part = blocks.blocks_page(
            uow, principal, dataset_id, first=first, last=last, limit=blocks.MAX_PAGE
        )
        window = blocks.key_range(ds.partition_json, first, last)
    elif first is not None or last is not None:
        raise InvalidBlocks(f"dataset '{dataset_id}' is not partitioned", field="from")
    tally = _Tally(head)
    with gc_paused():
        check = verification_of(uow, dataset_id) if verify else None
        for entry in _batches(uow, dataset_id, head):
            if check is not None:
                check.feed(entry)
            if not partitioned or _meets(entry, window):
                tally.feed(entry)
        replayer = None if check is None else check.replayer(_batches(uow, dataset_id, head))
    if check is not None and replayer is not None:
        remember(uow, dataset_id, check, replayer)
    with uow.read_only():
        names = {actor: _principal_name(uow, actor) for actor in tally.analysts}
    config = _config(config_json)
    now = now_blocks if partitioned else _current_status(config_json, stored_state)
    verification = None if replayer is None else _verdict(replayer, head_hash, stored_state, head)
    if verification is not None and now is None:
        verification["problems"].append(UNREADABLE)
        verification["ok"] = False
        verification["problem_count"] += 1
        verification["first_problem"] = verification["first_problem"] or UNREADABLE
    return {
        "dataset": identity,
        "guarantee": {
            "mode": identity["mode"],
            "relation": identity["relation"],
            "budget": {k: str(config_json[k]) for k in ("epsilon", "delta") if k in config_json},
            "config": config_json,
            "certified": tally.certified,
        },
        "status": now,
        "series": {
            "unit": tally.unit,
            "stride": tally.stride,
            "points": [
                {
                    "seq": p.seq,
                    "at": p.at,
                    "spent": fmt(p.spent),
                    "budget": fmt(p.budget),
                    "spent_delta": fmt(p.spent_delta),
                    "budget_delta": fmt(p.budget_delta),
                    "reserved": fmt(p.reserved),
                }
                for p in tally.series
            ],
        },
        "analysts": [
            _analyst_json(actor, names.get(actor), row, config)
            for actor, row in sorted(tally.analysts.items())
        ],
        "mechanisms": [
            _mechanism_json(kind, row, config) for kind, row in sorted(tally.mechanisms.items())
        ],
        "refunds": {"total": _text(tally.refunds), "odp_savings": _text(tally.odp_savings)},
        "rejections": {
            "total": tally.rejections,
            "by_level": dict(sorted(tally.by_level.items())),
            "by_reason": dict(tally.by_reason.most_common()),
        },
        "ledger": {
            "entries": sum(tally.kinds.values()),
            "kinds": dict(sorted(tally.kinds.items())),
        },
        "chain_head": {"seq": head, "hash": head_hash},
        "verification": verification,
        "blocks": blocks_part,
    }


UNREADABLE = "the dataset's stored configuration or state cannot be read"


def _meets(entry: Mapping[str, Any], window: tuple[int, int]) -> bool:
    """Whether a partitioned dataset's entry concerns the block range ``window`` (entries
    without a selection — creation, budget changes, blocks opened — always do)."""
    request = entry.get("request") or {}
    selection = request.get("blocks") if isinstance(request, Mapping) else None
    if not isinstance(selection, list):
        return True
    lo, hi = window
    return any(int(a) < hi and lo < int(b) for a, b in selection)


def _config(config_json: Mapping[str, Any]) -> AccountingConfig | None:
    """The dataset's configuration, or ``None`` when the row cannot be read (no attribution
    then; the verdict says why)."""
    try:
        return config_from_json(config_json)
    except Exception:
        return None


def _current_status(
    config_json: Mapping[str, Any], stored_state: Mapping[str, Any]
) -> JSONObject | None:
    """The status the dataset row claims now, or ``None`` when the row cannot be read (a
    tampered row must give a failed verdict, not a server error)."""
    try:
        config = config_from_json(config_json)
        view = status(config, state_from_json(config, stored_state))
    except Exception:
        return None
    view["summary"] = compose(view)
    return view


def _principal_name(uow: UnitOfWork, actor: str) -> str | None:
    principal = uow.principals.get(actor)
    return principal.name if principal is not None else None


def _totals_json(row: MechanismTotals, config: AccountingConfig | None) -> TotalsJson:
    """The fields a per-kind and a per-analyst row share: amounts, the (ε, δ) attribution and
    the summed RDP curve of a whole rdp dataset, and counts by outcome."""
    return {
        "charged": _text(row.charged),
        "refunded": _text(row.refunded),
        "attribution": None if config is None else row.spend.attribution(config),
        "curve": row.spend.curve_json(),
        "accepted": row.accepted,
        "reserved": row.reserved,
        "rejected": row.rejected,
        "settled": row.settled,
        "cancelled": row.cancelled,
    }


def _analyst_json(
    actor: str, name: str | None, row: AnalystTotals, config: AccountingConfig | None
) -> AnalystJson:
    totals = _totals_json(row, config)
    return {"actor": actor, "name": name, **totals, "curve_charges": row.curve_charges}


def _mechanism_json(
    kind: str, row: MechanismTotals, config: AccountingConfig | None
) -> MechanismJson:
    return {"kind": kind, **_totals_json(row, config)}
