"""What every accounting mode shares: decisions, reservations, errors, parsing helpers, and the
:class:`Mode` record through which the dispatch in :mod:`odometer_core.accounting.filters` reaches
a mode.

A mode is one module of this package holding its configuration, state, charge, admission,
settle/cancel (where it has reservations), budget change, status and JSON codec, and exporting
one :class:`Mode` that names those functions. Adding a mode is one module plus one line in
:data:`odometer_core.accounting.filters.LEAF_MODES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal

from odometer_core.accounting.amounts import Amount
from odometer_core.accounting.declarations import (
    DPSGD,
    Composed,
    Declaration,
    DeclarationError,
    MixtureOfGaussians,
    OdpPartition,
    Relation,
    RepeatAndSelect,
    SampledWithReplacement,
    Subsampled,
    TruncatedSubsampledGaussian,
)
from odometer_core.accounting.exact import (
    INFINITY,
    AmountError,
    fmt,
    parse_amount,
    to_float_down,
    to_float_up,
)
from odometer_core.accounting.odometer import Reading


class ConfigError(ValueError):
    """Invalid dataset / accounting configuration (→ HTTP 422)."""


class UnsupportedInMode(DeclarationError):
    """The dataset's mode has no sound charge for this declaration kind (→ HTTP 422)."""


#: Every code an :class:`InvalidTransition` carries, with whether it is a conflict with the
#: current state (True → HTTP 409) or a malformed request (False → HTTP 422).
TRANSITION_CODES: Final[dict[str, bool]] = {
    "UnknownCell": False,
    "NotSettleable": True,
    "NoOpenReservation": True,
    "BudgetBelowSpent": True,
    "BudgetAboveTotal": True,
    "AlreadySpent": True,
    "BudgetFixed": True,
    "ModeFixed": True,
    "ReservationsOpen": True,
}


class InvalidTransition(ValueError):
    """A settle / cancel / budget change that is not allowed in this state (→ HTTP 409/422)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Reservation:
    """An open ODP reservation (``basic`` mode): the partition and the sub-budget it lives in."""

    partition: OdpPartition
    sub_budget: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sub_budget": self.sub_budget,
            "cells": [{"name": n, "epsilon": fmt(e)} for n, e in self.partition.cells],
            "delta": fmt(self.partition.delta),
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Reservation:
        cells = tuple((c["name"], Decimal(c["epsilon"])) for c in obj["cells"])
        return Reservation(OdpPartition(cells, Decimal(obj["delta"])), obj.get("sub_budget"))


@dataclass(frozen=True, slots=True)
class Anchor:
    """The target a curve-mode filter was created with (accounting ≥ 1.4.0). Its thresholds,
    ladder and δ shares were derived from this target and are never derived again; the budget
    in force is enforced as a cap on the certified reading (``docs/accounting.md``, *Budget
    changes*). ``None`` on a configuration stored before 1.4.0, which keeps its rules."""

    epsilon: Decimal
    delta: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"epsilon": fmt(self.epsilon), "delta": fmt(self.delta)}

    @staticmethod
    def from_json(obj: Mapping[str, Any] | None) -> Anchor | None:
        return None if obj is None else Anchor(Decimal(obj["epsilon"]), Decimal(obj["delta"]))


def anchored_delta_problem(
    epsilon: Decimal,
    delta: Decimal,
    anchor: Anchor,
    final_conversion_delta: Decimal,
    approximate_spent: bool,
) -> str | None:
    """Why a budget (ε, δ) would fall below what an anchored filter already certifies, or
    ``None``: its ladder's readings hold at δ_c (so δ ≥ δ_c), and once an approximate
    declaration was admitted the reading is the creation target, so (ε, δ) ≥ it."""
    if delta < final_conversion_delta:
        return (
            f"the certified readings hold at delta={fmt(final_conversion_delta)} (the conversion "
            "delta fixed at creation); the budget delta cannot go below it"
        )
    if approximate_spent and (epsilon < anchor.epsilon or delta < anchor.delta):
        return (
            "approximate declarations were admitted under the filter fixed at creation, "
            f"certified at ({fmt(anchor.epsilon)}, {fmt(anchor.delta)}); the budget cannot go "
            "below it"
        )
    return None


#: Why a curve-mode filter stored before accounting 1.4.0 refuses a budget change once charged.
LEGACY_FIXED: Final = (
    "this budget was created before accounting 1.4.0: its thresholds would be derived again "
    "from a budget chosen after outputs were seen, which no filter theorem covers; it can no "
    "longer change once something was charged"
)
#: Why an anchored filter refuses a new conversion δ once charged.
CONVERSION_FIXED: Final = (
    "final_conversion_delta is fixed once something was charged: the δ shares of the certified "
    "readings were taken from it at creation"
)


def conversion_delta_for(
    current: Decimal, current_budget: Decimal, new_budget: Decimal, given: object
) -> Decimal:
    """δ_c of a ``zcdp``/``rdp`` filter made anew for δ_B = ``new_budget``: as ``given``, else
    the whole of δ_B when it was the whole before, else unchanged (:class:`ConfigError` when it
    would exceed δ_B)."""
    if given is not None:
        dc = amount({"final_conversion_delta": given}, "final_conversion_delta")
    elif current == current_budget:
        dc = new_budget
    else:
        dc = current
    if dc > new_budget:
        raise ConfigError("final_conversion_delta must be ≤ the budget delta")
    return dc


def keep_conversion_delta(current: Decimal, given: object) -> None:
    """An anchored filter's δ_c once charged: a change may only repeat it."""
    if given is not None and amount(
        {"final_conversion_delta": given}, "final_conversion_delta"
    ) != (current):
        raise ConfigError(CONVERSION_FIXED)


def spent_on_ladder(spent: Decimal, top: Decimal) -> float:
    """A scalar running total as an anchored ladder reads it (:class:`~odometer_core.accounting.
    odometer.AnchoredLadder`, whose top is the exact threshold ``top`` rounded down to a float):
    rounded up, except that a total within ``top`` itself is read at most at the ladder's top.

    Level 1 of the ladder *is* the filter, whose threshold is ``top`` exactly (admission
    compares Σ + c ≤ top in decimals), so a total at most ``top`` is held by level 1 and reads
    at most the creation target. Rounded up alone, a total between the float below ``top`` and
    ``top`` (a total landing exactly on the threshold, say) would be read by the level above
    the top: more than the budget in force (``docs/accounting.md``, *Certified odometer
    readings*)."""
    up = to_float_up(spent)
    if spent <= top:
        return min(up, to_float_down(top))
    return up


def within_creation_filter(config_epsilon: Decimal, config_delta: Decimal, anchor: Anchor) -> bool:
    """Whether the budget in force still covers the creation target, under which approximate
    declarations (δ_i > 0) are admitted: the ladder, which a cap or a raise relies on, does
    not cover them (``docs/accounting.md``, *Certified odometer readings*)."""
    return config_epsilon >= anchor.epsilon and config_delta >= anchor.delta


Outcome = Literal["accepted", "reserved", "rejected"]


@dataclass(frozen=True, slots=True)
class Decision:
    """The result of :func:`~odometer_core.accounting.filters.admit`, ``settle`` or ``cancel``.

    ``charge`` is what this step adds to the ledger in the mode's units (zero on rejection);
    ``requested`` what the invocation asked for; ``remaining`` the budget left afterwards (for a
    rejection: what was left, unchanged); ``refund`` what a settle or cancel gave back. All are
    typed amounts (:mod:`odometer_core.accounting.amounts`), formatted only at the edge.
    """

    outcome: Outcome
    state: Any
    charge: Amount
    requested: Amount
    remaining: Amount
    reason: str | None = None
    reservation: Reservation | None = None
    refund: Amount | None = None
    sub_budget: str | None = None

    @property
    def admitted(self) -> bool:
        return self.outcome != "rejected"


def reject(state: Any, requested: Amount, remaining: Amount, why: str, zero: Amount) -> Decision:
    """A rejection: nothing charged, the state unchanged."""
    return Decision("rejected", state, zero, requested, remaining, reason=why)


@dataclass(frozen=True, slots=True)
class Mode:
    """One leaf accounting mode, as the dispatch sees it (each function takes that mode's own
    config and state types; see the mode's module for their signatures and citations)."""

    name: str
    config_type: type
    state_type: type
    #: (ε_B, δ_B, relation, the ``accounting`` object) → config; raises :class:`ConfigError`
    parse: Callable[[Decimal, Decimal, Relation, Mapping[str, Any]], Any]
    initial_state: Callable[[Any], Any]
    #: why this mode cannot account the declaration (the 422 message), or ``None``
    unsupported: Callable[[Declaration], str | None]
    #: (config, state, declaration, conversion δ or None) → decision
    admit: Callable[[Any, Any, Declaration, Decimal | None], Decision]
    #: (config, state, ε_B, δ_B, final-conversion δ or None, anchored) → new config; with
    #: ``anchored`` False the rule of accounting versions before 1.4.0 (replay only)
    change_budget: Callable[[Any, Any, Decimal, Decimal, object, bool], Any]
    #: why the state would not fit under the config (``None`` when it fits)
    over_budget: Callable[[Any, Any], str | None]
    status: Callable[[Any, Any], dict[str, Any]]
    config_to_json: Callable[[Any], dict[str, Any]]
    config_from_json: Callable[[Decimal, Decimal, Relation, Mapping[str, Any]], Any]
    state_to_json: Callable[[Any], dict[str, Any]]
    state_from_json: Callable[[Mapping[str, Any]], Any]
    #: the state after a budget change (orders over new thresholds die in ``rdp``)
    after_budget_change: Callable[[Any, Any], Any] = lambda config, state: state
    #: settle (config, state, reservation, cell) and cancel (config, state, reservation) of an
    #: ODP reservation, in the modes that reserve (``None``: this mode never reserves)
    settle: Callable[[Any, Any, Reservation, str], Decision] | None = None
    cancel: Callable[[Any, Any, Reservation], Decision] | None = None
    #: the certified odometer reading (config, state) → reading
    #: (:mod:`odometer_core.accounting.odometer`); every leaf mode sets it
    odometer: Callable[[Any, Any], Reading] | None = None


def check_relation(decl: Declaration, relation: Relation) -> None:
    """Reject amplification claims under the wrong neighbouring relation .

    Poisson subsampling (and DP-SGD, which is Poisson-subsampled) is analysed under
    add/remove; sampling without replacement under replace-one (Balle–Barthe–Gaboardi 2018;
    Wang–Balle–Kasiviswanathan 2019). So are mixtures of Gaussians and truncated Poisson sampling
    (add/remove) and sampling with replacement (replace-one, BBG18 Thm 10). Nested declarations
    are checked recursively.
    """
    if isinstance(decl, Subsampled):
        if decl.required_relation != relation:
            raise DeclarationError(
                f"{decl.scheme} subsampling is analysed under the '{decl.required_relation}' "
                f"relation but the dataset uses '{relation}'",
                field="scheme",
            )
        check_relation(decl.mechanism, relation)
    elif isinstance(decl, DPSGD):
        if relation != "add_remove":
            raise DeclarationError(
                "dp_sgd uses Poisson subsampling, analysed under 'add_remove', "
                f"but the dataset uses '{relation}'"
            )
    elif isinstance(decl, Composed):
        for item, _ in decl.items:
            check_relation(item, relation)
    elif isinstance(decl, RepeatAndSelect):
        check_relation(decl.mechanism, relation)
    elif isinstance(decl, MixtureOfGaussians | TruncatedSubsampledGaussian):
        if relation != "add_remove":
            raise DeclarationError(
                f"{decl.kind} is analysed under 'add_remove' (Poisson sampling: the record is in "
                f"the batch or not), but the dataset uses '{relation}'",
                field="type",
            )
    elif isinstance(decl, SampledWithReplacement) and relation != "replace_one":
        raise DeclarationError(
            "sampling with replacement draws from a dataset of fixed size n, analysed under "
            "'replace_one' (Balle–Barthe–Gaboardi 2018 Thm 10), but the dataset uses "
            f"'{relation}'",
            field="type",
        )


# ---------------------------------------------------------------------------- parsing helpers
def amount(obj: Mapping[str, Any], name: str, *, default: Decimal | None = None) -> Decimal:
    """A non-negative exact amount from a configuration object (:class:`ConfigError` if not)."""
    if name not in obj or obj[name] is None:
        if default is None:
            raise ConfigError(f"missing '{name}'")
        return default
    try:
        d = parse_amount(obj[name], name)
    except AmountError as exc:
        raise ConfigError(str(exc)) from None
    if d < 0:
        raise ConfigError(f"{name} must be ≥ 0")
    return d


def check_budget(epsilon: Decimal, delta: Decimal) -> None:
    if epsilon <= 0:
        raise ConfigError("budget epsilon must be > 0")
    if epsilon > Decimal(10) ** 6:
        raise ConfigError("budget epsilon must be ≤ 1000000")
    if delta >= 1:
        raise ConfigError("budget delta must be < 1")


def only(obj: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown field(s): {', '.join(unknown)}")


def float_text(x: float) -> str:
    """A float's lossless text (its shortest ``repr``)."""
    return repr(float(x))


__all__ = [
    "CONVERSION_FIXED",
    "INFINITY",
    "LEGACY_FIXED",
    "TRANSITION_CODES",
    "Anchor",
    "ConfigError",
    "Decision",
    "InvalidTransition",
    "Mode",
    "Outcome",
    "Reservation",
    "UnsupportedInMode",
    "amount",
    "anchored_delta_problem",
    "check_budget",
    "check_relation",
    "conversion_delta_for",
    "float_text",
    "keep_conversion_delta",
    "only",
    "reject",
    "spent_on_ladder",
    "within_creation_filter",
]
