"""One invocation decided at every budget level it spends at (pure).

An invocation on a dataset spends at up to three levels: the dataset's own filter, the
organisation's cap (when one is in force) and the analyst's quota (when the grant sets one).
Each level is an ordinary filter of this core. The rule that combines them:

* every level decides on the state it holds (the same declaration and conversion δ; the
  sub-budget choice applies to the dataset only: the upper levels are leaf filters);
* the first refusal in the order dataset, organisation, quota is the one reported;
* on a refusal nothing changes at any level; otherwise every level moves to its new state.

An organisation cap is a filter in any leaf mode (:func:`cap_config`): a curator's currency,
not the dataset's. Each invocation is charged at the cap from its declaration, by the cap
mode's own conversion, under the relation of the dataset it reads (:func:`under_relation`);
``docs/accounting.md``, *Organisation caps*, gives the argument.

Settling or cancelling a reservation is applied to every upper level that holds it
(:func:`finish_uppers`): a ``basic`` level refunds as the dataset does, a ``zcdp`` / ``rdp``
level keeps the worst cell on settle and releases it on cancel; the dataset's own settle /
cancel is :func:`~.filters.settle` / :func:`~.filters.cancel`. A quota holds a reservation
only as long as the grant that reserved it is in force: a quota is identified by its grant,
and a grant revoked (or replaced by a new one) takes its quota's share of every open
reservation with it (:func:`quota_holds`, :data:`DROPPED`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, localcontext
from typing import Any, Final, cast

from odometer_core.accounting import memo
from odometer_core.accounting.blocks import (
    Selected,
    SelectionDecision,
    decide_selected,
    summarise,
)
from odometer_core.accounting.declarations import Declaration, DeclarationError, Relation
from odometer_core.accounting.exact import DOWN, fmt
from odometer_core.accounting.filters import (
    AccountingConfig,
    Decision,
    FilterState,
    Reservation,
    admit,
    cancel,
    change_budget,
    config_from_json,
    config_to_json,
    initial_state,
    make_config,
    settle,
    state_from_json,
    state_to_json,
    status,
)
from odometer_core.accounting.json_types import CapOrder, ClosedPhaseJSON, LevelPart, StatementJSON
from odometer_core.accounting.modes import LEAF_MODES, budget
from odometer_core.accounting.modes.common import (
    ConfigError,
    InvalidTransition,
    UnsupportedInMode,
)

DATASET: Final = "dataset"
ORGANISATION: Final = "organisation"
QUOTA: Final = "quota"

#: A level's filter: its configuration and the state it holds now.
Filter = tuple[AccountingConfig, FilterState]

#: The outcome recorded for a quota's share of a reservation finished after the grant that
#: reserved it was revoked or replaced: the share is dropped with that grant's quota, and the
#: quota now in force (if any) is not touched.
DROPPED: Final = "dropped"


#: The modes an organisation cap may take: one filter over every dataset (no sub-budgets).
CAP_MODES: Final = ("basic", "zcdp", "rdp", "gdp")

#: A ``zcdp`` / ``rdp`` cap's default share of δ_B kept for the δ of approximate declarations
#: (δ_A; Bun–Steinke 2016 Prop. 1.13 carries it beside ρ); the rest, δ_c, converts the curve.
#: A dataset's default gives all of δ_B to δ_c, which refuses every (ε, δ > 0) declaration;
#: a cap spans datasets in every mode, so it keeps a share for them. ``final_conversion_delta``
#: given with the cap overrides it.
CAP_APPROX_SHARE: Final = Decimal("0.01")

#: The relation a cap's configuration is stored under; each decision uses the dataset's.
CAP_RELATION: Final[Relation] = "add_remove"


#: The cap mode this service recommends: ``rdp`` accounts every declaration kind ``zcdp``
#: does (pure, approximate, ρ, Gaussians, ODP, …) and DP-SGD, subsampled Gaussians, RDP curves,
#: private selection and the mixtures besides; which mode accounts which kind:
#: :func:`cap_modes_for` (``docs/accounting.md``, *Which cap accounts which declaration*).
RECOMMENDED_CAP_MODE: Final = "rdp"


def cap_modes_for(declaration: Declaration) -> tuple[str, ...]:
    """The cap modes (of :data:`CAP_MODES`) that can account ``declaration``: the rule each
    mode's ``admit`` applies before charging (:func:`~.filters.supports`)."""
    return tuple(m for m in CAP_MODES if LEAF_MODES[m].unsupported(declaration) is None)


class CapCannotAccount(UnsupportedInMode):
    """A declaration the organisation cap's mode has no sound charge for (HTTP 422), whatever
    the dataset decides: it names the cap (its organisation and mode) and the cap modes that
    account the declaration (:func:`cap_modes_for`)."""

    def __init__(
        self, mode: str, declaration: Declaration, why: str, organisation: str | None = None
    ) -> None:
        works = cap_modes_for(declaration)
        whose = "" if organisation is None else f"organisation '{organisation}': "
        reason = why.split("; use ")[0]  # the mode's advice is a dataset's, not a cap's
        if works:
            names = [repr(m) for m in works]
            listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
            path = f"/v1/organisations/{organisation or '{id}'}/cap"
            fix = (
                f"a cap in mode {listed} accounts it: a curator sets one, or replaces a cap "
                f'that has counted (PATCH {path} with "replace": true)'
            )
        else:
            fix = "no cap mode accounts it"
        super().__init__(
            f"{whose}the organisation cap (mode '{mode}') cannot account "
            f"'{declaration.kind}': {reason}; {fix}"
        )
        self.mode = mode
        self.organisation = organisation
        self.modes = works


def check_cap_accounts(
    config: AccountingConfig, declaration: Declaration, organisation: str | None = None
) -> None:
    """Raise :class:`CapCannotAccount` when the cap ``config`` cannot account
    ``declaration`` (the rule of :func:`decide_levels` and of the cap's capacity)."""
    why = LEAF_MODES[config.mode].unsupported(declaration)
    if why is not None:
        raise CapCannotAccount(config.mode, declaration, why, organisation)


def cap_config(
    epsilon: object, delta: object, accounting: Mapping[str, Any] | None
) -> AccountingConfig:
    """An organisation cap's filter: (ε, δ) in ``accounting``'s leaf mode (default ``basic``),
    stored under :data:`CAP_RELATION`. A ``zcdp`` / ``rdp`` cap keeps :data:`CAP_APPROX_SHARE`
    of δ for approximate declarations unless ``final_conversion_delta`` is given.
    Raises :class:`ConfigError` (422) for a mode a cap cannot take."""
    acc = dict(accounting or {"mode": "basic"})
    mode = acc.get("mode", "basic")
    if mode not in CAP_MODES:
        raise ConfigError(f"an organisation cap's mode must be one of {', '.join(CAP_MODES)}")
    if mode in ("zcdp", "rdp") and acc.get("final_conversion_delta") is None:
        _, dlt = budget(epsilon, delta)
        acc["final_conversion_delta"] = fmt(DOWN.multiply(dlt, 1 - CAP_APPROX_SHARE))
    return make_config(epsilon, delta, CAP_RELATION, acc)


def change_cap(
    config: AccountingConfig,
    state: FilterState,
    epsilon: object,
    delta: object,
    accounting: Mapping[str, Any] | None,
) -> tuple[AccountingConfig, FilterState]:
    """A curator sets or changes the cap (ε, δ) in ``accounting``'s mode, from the filter
    ``(config, state)`` counted so far.

    Before anything is counted the cap is made anew, in any mode (:func:`cap_config`). After
    that its mode is fixed (409 ``ModeFixed``) and the change follows the rule of datasets
    (:func:`~.filters.change_budget`; ``docs/accounting.md``, *Budget changes*): never below
    what is counted or certified; in ``zcdp`` / ``rdp`` / ``gdp`` the thresholds fixed when
    the cap was made stay and ε caps the certified reading. A ``basic`` cap's conversion δ is
    δ/10 of the new cap unless given, as when it is made. Without ``accounting`` the cap keeps
    its mode (``basic`` for an organisation that never had a cap), with that mode's defaults."""
    acc = dict(accounting or {"mode": config.mode})
    mode = acc.get("mode", "basic")
    if state == initial_state(config):
        new = cap_config(epsilon, delta, acc)
        return under_relation(new, config.relation), initial_state(new)
    if mode != config.mode:
        raise InvalidTransition(
            "ModeFixed",
            f"the cap counts invocations in mode '{config.mode}'; its mode is fixed once it has "
            'counted something: replace it ("replace": true) to count in another mode from '
            "now on, its reading kept as a closed statement",
        )
    if mode == "basic":
        change_budget(config, state, epsilon, delta)  # never below what is counted
        return under_relation(cap_config(epsilon, delta, acc), config.relation), state
    later = sorted(set(acc) - {"mode", "final_conversion_delta"})
    if later:
        raise ConfigError(
            f"{', '.join(later)} can be chosen only before the cap has counted anything"
        )
    return change_budget(
        config, state, epsilon, delta, final_conversion_delta=acc.get("final_conversion_delta")
    )


@dataclass(frozen=True, slots=True)
class ClosedPhase:
    """A cap replaced after it counted: its mode and its certified reading when it was
    replaced (the phase's statement, fixed then), and ``after_seq``, the last organisation
    sequence number it counted (``docs/accounting.md``, *Cap replacement*)."""

    mode: str
    epsilon: Decimal
    delta: Decimal
    after_seq: int

    def to_json(self) -> ClosedPhaseJSON:
        return {
            "mode": self.mode,
            "epsilon": fmt(self.epsilon),
            "delta": fmt(self.delta),
            "after_seq": self.after_seq,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClosedPhase:
        return cls(
            str(data["mode"]),
            Decimal(str(data["epsilon"])),
            Decimal(str(data["delta"])),
            int(data["after_seq"]),
        )


def closed_statement(config: AccountingConfig, state: FilterState, after_seq: int) -> ClosedPhase:
    """The statement a cap that is replaced leaves: its certified reading now
    (:func:`~.filters.status`), valid at this stopping time and fixed from now on."""
    reading = status(config, state)["odometer"]
    return ClosedPhase(
        config.mode, Decimal(reading["epsilon"]), Decimal(reading["delta"]), after_seq
    )


def replace_cap(
    config: AccountingConfig,
    state: FilterState,
    epsilon: object,
    delta: object,
    accounting: Mapping[str, Any] | None,
    after_seq: int,
) -> tuple[AccountingConfig, FilterState, ClosedPhase | None]:
    """A curator replaces the cap, in any mode: the counted filter's certified reading is
    closed (:func:`closed_statement`) and a new filter (:func:`cap_config`) counts from now
    on. A cap that has counted nothing is simply set anew (no phase is closed). Without
    ``accounting`` the new cap keeps the mode of the one it replaces."""
    acc = dict(accounting or {"mode": config.mode})
    new = cap_config(epsilon, delta, acc)
    closed = None if state == initial_state(config) else closed_statement(config, state, after_seq)
    return under_relation(new, config.relation), initial_state(new), closed


def statement_sum(
    closed: Sequence[ClosedPhase], config: AccountingConfig, state: FilterState
) -> StatementJSON:
    """The organisation's statement across cap replacements: the closed phases' (ε, δ) and
    the certified reading of the cap in force ``(config, state)`` summed (basic composition of
    the phases), and how many phases were summed. A cap in force that has counted nothing
    since a replacement released nothing: it adds nothing (its empty ladder reading would add
    its δ for no output)."""
    phases = list(closed)
    with localcontext() as exact:
        exact.prec = 200  # exact: a few decimals of at most a few dozen digits each
        eps = sum((p.epsilon for p in phases), Decimal(0))
        dlt = sum((p.delta for p in phases), Decimal(0))
        summed = len(phases)
        if not phases or state != initial_state(config):
            reading = status(config, state)["odometer"]
            eps += Decimal(reading["epsilon"])
            dlt += Decimal(reading["delta"])
            summed += 1
    return {"epsilon": fmt(eps), "delta": fmt(dlt), "phases": summed}


def under_relation(config: AccountingConfig, relation: str) -> AccountingConfig:
    """A cap's filter as it decides an invocation on a dataset of ``relation``: the same
    thresholds and state, the declaration converted under that dataset's relation."""
    if config.relation == relation:
        return config
    if relation == "add_remove":
        return replace(config, relation="add_remove")
    if relation == "replace_one":
        return replace(config, relation="replace_one")
    raise ConfigError("relation must be 'add_remove' or 'replace_one'")


@dataclass(frozen=True, slots=True)
class LevelOutcome:
    """One level's decision and the state it holds afterwards (its new state if the
    invocation is admitted at every level, the state it held otherwise)."""

    name: str  # DATASET | ORGANISATION | QUOTA
    decision: Decision
    state: FilterState


@dataclass(frozen=True, slots=True)
class LevelsDecision:
    """The outcome of :func:`decide_levels`.

    ``uppers`` are the organisation and quota outcomes, in that order, for the levels in
    force (and, with ``exhaustive=False``, only up to the first refusal); ``refused_by`` names
    the level whose refusal is reported, ``None`` when every level admits.
    """

    dataset: LevelOutcome
    uppers: tuple[LevelOutcome, ...]
    refused_by: str | None
    #: on a partitioned dataset, every selected history's decision (the dataset outcome is
    #: their summary: :func:`~.blocks.summarise`)
    selection: SelectionDecision | None = None

    @property
    def admitted(self) -> bool:
        return self.refused_by is None

    @property
    def refusal(self) -> Decision | None:
        """The reported refusal (the first level that refused), if any."""
        for outcome in (self.dataset, *self.uppers):
            if outcome.name == self.refused_by:
                return outcome.decision
        return None

    @property
    def reported(self) -> Decision:
        """The decision to show: the refusal, or the dataset's decision when admitted."""
        return self.refusal or self.dataset.decision

    def upper(self, name: str) -> LevelOutcome | None:
        return next((o for o in self.uppers if o.name == name), None)


#: The order in which the levels decide; the first that refused is the one reported.
LEVEL_ORDER: Final = (DATASET, ORGANISATION, QUOTA)


def reported_refusal(refusals: Iterable[tuple[str, bool]]) -> str | None:
    """The level whose refusal is reported: the first, in :data:`LEVEL_ORDER`, of the levels
    ``(name, refused)`` that refused; ``None`` when none did. The one rule for the 409's
    ``level`` (:func:`decide_levels`) and for whoever reads a rejection back from the ledger
    (the report)."""
    refused = {name for name, did in refusals if did}
    return next((name for name in LEVEL_ORDER if name in refused), None)


def decide_levels(
    dataset: Filter | Selected,
    declaration: Declaration,
    *,
    organisation: Filter | None = None,
    quota: Filter | None = None,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
    exhaustive: bool = True,
    organisation_id: str | None = None,
) -> LevelsDecision:
    """Decide ``declaration`` at the dataset, the organisation cap and the quota.

    ``organisation`` / ``quota`` are ``None`` when that level is not in force. With
    ``exhaustive`` (registration: the ledger records every level's decision) every level
    decides even after a refusal; without it (a preview) deciding stops at the first refusal.
    ``dataset`` is a partitioned dataset's selection of blocks (:class:`~.blocks.Selected`)
    or a whole dataset's filter. A selection is one decision: admitted only if every selected
    block admits, each charged the whole cost (parallel composition: ``docs/accounting.md``,
    *Partitioned datasets*); the levels above are charged once per invocation, whatever the
    number of blocks.

    Raises what :func:`~.filters.admit` raises, in the level order; a declaration the
    organisation cap cannot account is refused once the dataset has decided, whatever it
    decided, registration and preview alike (:class:`CapCannotAccount`, naming
    ``organisation_id`` when given).
    """
    selection = None
    if isinstance(dataset, Selected):
        if sub_budget is not None:
            raise ConfigError("'sub_budget' is only allowed on split datasets")
        selection = decide_selected(dataset, declaration, conversion_delta=conversion_delta)
        own: tuple[AccountingConfig, Any] = (dataset.config, dataset.blocks)
        first = summarise(selection)
    else:
        own = dataset
        first = admit(
            *dataset, declaration, sub_budget=sub_budget, conversion_delta=conversion_delta
        )
    if organisation is not None:  # the same 422 in a preview, whatever the dataset decides
        check_cap_accounts(organisation[0], declaration, organisation_id)
    decisions = [(DATASET, own, first)]
    for name, level in ((ORGANISATION, organisation), (QUOTA, quota)):
        if level is None or not (exhaustive or decisions[-1][2].admitted):
            continue
        decided = admit(*level, declaration, conversion_delta=conversion_delta)
        decisions.append((name, level, decided))
    refused_by = reported_refusal((name, not d.admitted) for name, _, d in decisions)
    outcomes = [
        LevelOutcome(name, d, d.state if refused_by is None else held)
        for name, (_, held), d in decisions
    ]
    return LevelsDecision(outcomes[0], tuple(outcomes[1:]), refused_by, selection)


def finish_uppers(
    uppers: tuple[tuple[str, Filter], ...], reservation: Reservation, cell: str | None
) -> tuple[LevelOutcome, ...]:
    """Settle (``cell``) or cancel (``None``) each upper level's share of a reservation.

    The upper levels are leaf filters: the reservation's sub-budget is the dataset's only.
    """
    own = replace(reservation, sub_budget=None)
    out = []
    for name, (config, state) in uppers:
        d = cancel(config, state, own) if cell is None else settle(config, state, own, cell)
        out.append(LevelOutcome(name, d, d.state))
    return tuple(out)


def quota_holds(reserved_under: int | None, in_force: int | None) -> bool:
    """Whether the quota in force finishes (settles, cancels) a reservation's quota share.

    ``reserved_under`` is the grant whose quota reserved, ``in_force`` the grant whose quota is
    in force now (``None``: none), each named by the ``seq`` of the ``grant_changed`` ledger
    entry that made it, which no other grant of the dataset shares. Only the quota that
    reserved holds the share; once its grant is gone the share is dropped (:data:`DROPPED`):
    a quota is one more filter over a subset of the dataset's invocations, and forgetting it
    forgets nothing the dataset's and the organisation's filters do not still finish. A
    ``reserved_under`` of ``None`` (unknown: reserved before grants were told apart) keeps the
    earlier rule, the quota in force holds it."""
    if in_force is None:
        return False
    return reserved_under is None or reserved_under == in_force


def precompute_levels(
    dataset: Filter,
    declaration: Declaration,
    organisation: Filter | None,
    quota: Filter | None,
    sub_budget: str | None,
    conversion_delta: Decimal | None,
) -> dict[object, object]:
    """The memo table (:mod:`odometer_core.accounting.memo`) of deciding ``declaration`` at every
    level,
    computed on the filters as read before the lock: the charges do not depend on the state, so
    the decision under the lock finds them there. A declaration the levels refuse to account
    (422) leaves what was computed before the error; the decision raises it again."""
    with memo.charges() as table, contextlib.suppress(DeclarationError):
        decide_levels(
            dataset,
            declaration,
            organisation=organisation,
            quota=quota,
            sub_budget=sub_budget,
            conversion_delta=conversion_delta,
        )
    return dict(table)


# ---------------------------------------------------------------------------- levels as stored
#: The filter a cap decides with for bookkeeping only (settle and cancel of reservations taken
#: under an organisation without a cap, on rows written before caps had modes).
UNCAPPED: Final = (Decimal(10) ** 6, Decimal("0.999999999999"))


def stored_cap(
    cap_config_json: Mapping[str, Any] | None,
    cap_json: Mapping[str, Any] | None,
    cap_state_json: Mapping[str, Any],
    relation: str,
) -> Filter:
    """An organisation cap's filter as it decides under ``relation`` (a dataset's), from its
    row: the stored configuration in its own mode, or, on a row written before caps had modes,
    the ``basic`` filter of ``cap_json`` (:data:`UNCAPPED` when no cap was ever set)."""
    if cap_config_json is not None:
        config = under_relation(config_from_json(cap_config_json), relation)
    else:
        eps, dlt = (cap_json["epsilon"], cap_json["delta"]) if cap_json else UNCAPPED
        config = make_config(eps, dlt, relation, {"mode": "basic"})
    return config, state_from_json(config, cap_state_json)


def stored_quota(
    quota_config_json: Mapping[str, Any] | None, quota_state_json: Mapping[str, Any] | None
) -> Filter | None:
    """A grant's quota filter from its row (``None``: no quota set)."""
    if quota_config_json is None or quota_state_json is None:
        return None
    config = config_from_json(quota_config_json)
    return config, state_from_json(config, quota_state_json)


def cap_order(
    seq: int,
    cap_config_seq: int | None,
    cap_config_json: Mapping[str, Any] | None,
    cap_json: Mapping[str, Any] | None,
    cap_state_json: Mapping[str, Any],
    cap_closed_json: Sequence[Mapping[str, Any]] | None,
) -> CapOrder:
    """What a ledger entry that touches the cap records of its order across the organisation's
    datasets, ``seq`` being the cap's next: the ``seq`` and, the first time after the cap was
    set or changed (``cap_config_seq`` is ``None``), the configuration in force, its state
    before, and the phase it replaced just before (the replay carries them forward:
    :func:`odometer_core.ledger.organisation.replay_organisation`)."""
    out: CapOrder = {"seq": seq}
    if cap_config_seq is None:
        config, state = stored_cap(cap_config_json, cap_json, cap_state_json, CAP_RELATION)
        out["config"] = config_to_json(config)
        out["before"] = state_to_json(state)
        closed = cap_closed_json or []
        if closed and closed[-1]["after_seq"] == seq - 1:  # replaced just before
            out["replaced"] = cast(ClosedPhaseJSON, dict(closed[-1]))
    return out


def level_record(
    owner: str,
    filter_: Filter,
    decision: Decision,
    *,
    applied: bool,
    budget: bool = False,
    granted_seq: int | None = None,
) -> LevelPart:
    """What a ledger entry records of one upper level's decision (part of the hashed payload):
    its ``owner``, outcome, charge (when ``applied``) and state after; with ``budget`` the
    cap's ε and δ; a quota's grant (``granted_seq``)."""
    config, before = filter_
    out: LevelPart = {
        "id": owner,
        "outcome": decision.outcome,
        "applied": applied,
        "charge": decision.charge.to_json() if applied else None,
        "requested": decision.requested.to_json(),
        "refund": None if not applied or decision.refund is None else decision.refund.to_json(),
        "reservation": decision.reservation.to_json() if applied and decision.reservation else None,
        "state": state_to_json(decision.state if applied else before),
    }
    if budget:
        out["budget"] = {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)}
    if granted_seq is not None:
        out["grant"] = granted_seq
    return out


def cap_used_by(usage: Mapping[str, int] | None, limit: int = 5) -> str:
    """The datasets that used an organisation's cap most (``usage``: invocations by dataset),
    as a refusal says it."""
    usage = usage or {}
    top = sorted(usage.items(), key=lambda kv: (-int(kv[1]), kv[0]))[:limit]
    if not top:
        return "no invocation registered under the cap yet"
    more = f" and {len(usage) - limit} more" if len(usage) > limit else ""
    return "used by " + ", ".join(f"{d} ({n} invocations)" for d, n in top) + more
