"""A filter's state after k more admissions of one declaration, computed at once, exactly as k
successive calls of :func:`~odometer_core.accounting.filters.admit` would leave it
(``docs/accounting.md``, *How many more fit*).

:func:`~odometer_core.accounting.filters.capacity` counts how many more of a declaration a
filter admits in a row by searching over n, deciding "is the n-th admitted?" with the real
``admit`` on the state n − 1 admissions leave. That state comes from here. Every mode's charge
of a declaration depends on the declaration and the configuration only, never on the state
(it is what :mod:`.memo` keeps), so each admission adds the *same* charge, with the mode's own
rounding, to the same running sums:

- ``basic``: E (or, for an ODP declaration with more than one cell, the reserved ε and the
  count of open reservations) and D, each ``add_up(sum, charge)``: a decimal addition rounded
  toward +∞ at :data:`~odometer_core.accounting.exact.PRECISION` digits;
- ``zcdp``: Σρ and Σδ, the same decimal additions; ``gdp``: Σμ², likewise;
- ``rdp``: per order α, S(α) ← nextafter(S(α) + ε(α), +∞) in binary64 (round to nearest, ties
  to even, then one ulp up), Σδ as a decimal, and the orders whose S(α) crossed B(α) marked
  dead (S only grows, so "crossed at some step up to k" is "S after k steps > B(α)");
- ``split``: the named sub-budget's leaf state, as its mode.

Neither repeated addition is k times the charge added once; both are reproduced exactly:

*Decimal* (:func:`add_repeatedly`). After one real addition the sum s has at most P =
:data:`~odometer_core.accounting.exact.PRECISION` digits. While the result stays below
10^(A+1), with A the exponent of s's leading digit, every result is rounded on the same
quantum Q = 10^(A−P+1), of which s is a multiple, so ceiling(s + c) = s + ⌈c/Q⌉·Q: the same
increment d = ⌈c/Q⌉·Q each step (rounding toward +∞ has no ties). All the steps whose result
stays ≤ 10^(A+1) are taken at once in integers, then one real addition crosses into the next
decade. At most one decade per factor of 10 of growth: a handful of big-integer operations.

*Binary64* (:func:`add_up_repeatedly`). Where s has ulp u (s = m·u, m < 2^53: a binade, or the
subnormals with the lowest normal binade), adding c rounds m + c/u to an integer, to nearest,
ties to even, and nextafter adds one: the increment is g(m) = ⌊c/u⌋ + 1 + r, with r = 1 if the
fraction of c/u is above ½, 0 below, and on a tie the parity of m + ⌊c/u⌋. g depends on the
parity of m only, and after at most one step on a tie it no longer changes (the step that adds
g(m) lands on a parity with the same increment), so each binade is crossed in one integer step
plus at most one single step for a tie and one real addition across the binade's top: about
log₂(growth) operations per order instead of k.

Whatever the mode then decides (thresholds, δ, the creation filter of approximate
declarations, the conversion to ε) is decided by ``admit`` itself on the advanced state, so
nothing of the decision is reproduced here. :func:`stepper` returns ``None`` for a state it
does not know (a mode added later, negative sums), and ``capacity`` then counts with the loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any, Final, TypeAlias

from odometer_core.accounting.amounts import Amount, EpsilonDelta, MuSquared, RdpCurve, RhoDelta
from odometer_core.accounting.exact import PRECISION, UP
from odometer_core.accounting.modes.basic import BasicState
from odometer_core.accounting.modes.common import Decision
from odometer_core.accounting.modes.gdp import GDPState
from odometer_core.accounting.modes.rdp import WEIGHTS_FIRST, RDPConfig, RDPState, in_force
from odometer_core.accounting.modes.split import SplitConfig, SplitState
from odometer_core.accounting.modes.statements import NO_BRANCH
from odometer_core.accounting.modes.zcdp import ZCDPState

#: ``advance(state, k)``: the state after k more admissions of the same charge.
Advance: TypeAlias = Callable[[Any, int], Any]

#: 2^53: a binade holds the multiples m·u of its ulp u with 2^52 ≤ m < 2^53 (0 ≤ m for the
#: subnormals, whose ulp is the lowest normal binade's).
_BINADE: Final = 1 << 53
#: The decimal quantum's span: a sum of at most PRECISION digits whose leading digit is at
#: 10^A is a multiple of 10^(A−PRECISION+1) below 10^(A+1).
_DECADE: Final = 10**PRECISION


# ---------------------------------------------------------------------------- decimal sums
def _split(d: Decimal) -> tuple[int, int]:
    """(n, e) with d = n·10^e (d finite, ≥ 0)."""
    _, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    return int("".join(map(str, digits)) or "0"), exponent


def add_repeatedly(total: Decimal, amount: Decimal, times: int) -> Decimal:
    """``total`` after ``times`` additions of ``amount``, each rounded toward +∞ at
    :data:`~odometer_core.accounting.exact.PRECISION` digits, as ``add_up(total, amount)``
    repeated ``times`` times gives it (module docstring). ``total`` and ``amount`` are ≥ 0
    (``amount`` may be +∞)."""
    if times <= 0:
        return total
    s = UP.add(total, amount)  # one real addition: s has at most PRECISION digits from here
    times -= 1
    if times == 0 or not s.is_finite() or amount.is_zero():
        return s  # ∞ stays ∞; adding 0 to a sum of at most PRECISION digits changes nothing
    c_int, c_exp = _split(amount)
    while times > 0:
        s_int, s_exp = _split(s)
        lead = s_exp + len(str(s_int)) - 1  # A: the exponent of s's leading digit
        quantum = lead - PRECISION + 1
        if amount.adjusted() <= lead + 1:
            shift = s_exp - quantum  # exact either way: s has at most PRECISION digits
            s_q = s_int * 10**shift if shift >= 0 else s_int // 10**-shift
            if c_exp >= quantum:
                step = c_int * 10 ** (c_exp - quantum)
            else:
                step = -((-c_int) // 10 ** (quantum - c_exp))  # ⌈c/Q⌉
            # each step's exact sum is at most s_q + step, so its result stays on Q while
            # s_q + j·step ≤ 10^(A+1)
            n = min(times, (_DECADE - s_q) // step)
            if n > 0:
                s_q += n * step
                times -= n
                s = Decimal(f"{s_q}E{quantum}")
                if times == 0:
                    break
        s = UP.add(s, amount)  # across the decade's top (or c above it): one real addition
        times -= 1
    return s


# ---------------------------------------------------------------------------- binary64 sums
def add_up_repeatedly(total: float, amount: float, times: int) -> float:
    """``total`` after ``times`` steps of ``total = nextafter(total + amount, +∞)`` in binary64
    (module docstring), the update of one order's S(α) in ``rdp`` mode. ``total`` and
    ``amount`` are ≥ 0 (either may be +∞)."""
    s = total
    while times > 0:
        if not math.isfinite(s) or not math.isfinite(amount):
            return math.nextafter(s + amount, math.inf)  # ∞ from here on
        ulp = math.ulp(s)
        e = math.frexp(ulp)[1] - 1  # ulp = 2^e
        _, ce = math.frexp(amount)  # amount < 2^ce
        if amount == 0 or ce - e <= 53:
            m = int(math.ldexp(s, -e))  # exact: s = m·2^e, m ≤ 2^53
            t = math.ldexp(amount, -e)  # c/u, exact unless far below ½ (then only < ½ counts)
            q = int(t)
            frac = t - q

            def inc(mm: int, q: int = q, frac: float = frac) -> int:
                if frac != 0.5:
                    return q + 1 + (frac > 0.5)
                return q + 1 + ((mm + q) & 1)  # a tie: to the even neighbour

            # a step from m rounds on this binade's grid iff m + q + 1 ≤ 2^53 − 1
            if m + q + 2 <= _BINADE:
                g = inc(m)
                # one step alone where a tie's first step changes the increment (parity), else
                # every step from here whose result stays on this binade's grid
                n = 1 if inc(m + g) != g else min(times, (_BINADE - q - 2 - m) // g + 1)
                m += n * g
                times -= n
                try:
                    s = math.ldexp(float(m), e)  # m ≤ 2^53: exact
                except OverflowError:  # m = 2^53 in the top binade: the step went to +∞
                    s = math.inf
                continue
        s = math.nextafter(s + amount, math.inf)  # across the binade's top: one real step
        times -= 1
    return s


# ---------------------------------------------------------------------------- per mode
def _non_negative(*amounts: Decimal) -> bool:
    return all(not a.is_nan() and a >= 0 for a in amounts)


def _leaf(config: Any, state: Any, charge: Amount, reserved: bool, after: Any) -> Advance | None:
    """The advance of one leaf filter (``after``: its state after the first admission), or
    ``None`` for a state this module does not know."""
    if isinstance(state, BasicState) and isinstance(charge, EpsilonDelta):
        eps, delta = charge.epsilon, charge.delta
        if not _non_negative(
            eps, delta, state.spent_epsilon, state.reserved_epsilon, state.spent_delta
        ):
            return None
        if reserved:

            def basic_reserved(st: BasicState, k: int) -> BasicState:
                return replace(
                    st,
                    reserved_epsilon=add_repeatedly(st.reserved_epsilon, eps, k),
                    spent_delta=add_repeatedly(st.spent_delta, delta, k),
                    open_reservations=st.open_reservations + k,
                )

            return basic_reserved

        def basic(st: BasicState, k: int) -> BasicState:
            return replace(
                st,
                spent_epsilon=add_repeatedly(st.spent_epsilon, eps, k),
                spent_delta=add_repeatedly(st.spent_delta, delta, k),
            )

        return basic
    if isinstance(state, ZCDPState) and isinstance(charge, RhoDelta):
        rho, delta = charge.rho, charge.delta
        if not _non_negative(rho, delta, state.rho, state.delta):
            return None

        # the first declaration's choice of ladder (1.9.0 on) as ``after`` recorded it
        zfirst = after.first if isinstance(after, ZCDPState) else None
        zshape = after.ladder if isinstance(after, ZCDPState) else None

        def zcdp(st: ZCDPState, k: int) -> ZCDPState:
            rho_k, delta_k = add_repeatedly(st.rho, rho, k), add_repeatedly(st.delta, delta, k)
            return ZCDPState(rho_k, delta_k, zfirst, zshape)

        return zcdp
    if isinstance(state, GDPState) and isinstance(charge, MuSquared):
        m2 = charge.mu_squared
        if not _non_negative(m2, state.mu_squared):
            return None

        gfirst = after.first if isinstance(after, GDPState) else None
        gshape = after.ladder if isinstance(after, GDPState) else None

        def gdp(st: GDPState, k: int) -> GDPState:
            return GDPState(add_repeatedly(st.mu_squared, m2, k), gfirst, gshape)

        return gdp
    if isinstance(state, RDPState) and isinstance(charge, RdpCurve):
        assert isinstance(config, RDPConfig)
        # the weights in force after ``first`` (which made the choice where none was made yet:
        # then the advance starts from the chosen filter's initial dead orders, as admit does)
        if not isinstance(after, RDPState):
            return None
        chosen = after.first
        if config.weights_rule == WEIGHTS_FIRST and chosen is None:
            return None
        pld = after.pld  # the PLD branch (1.6.0): unchanged by admissions only when off or absent
        if pld != NO_BRANCH and not pld.off:
            return None
        curve, delta, thresholds = (
            charge.rdp,
            charge.delta,
            in_force(config, after).thresholds,
        )
        sums = (*curve, *state.rdp)
        if not _non_negative(delta, state.delta) or not all(x >= 0 for x in sums):
            return None  # (a NaN fails x >= 0 too)

        def rdp(st: RDPState, k: int) -> RDPState:
            s = tuple(add_up_repeatedly(x, c, k) for x, c in zip(st.rdp, curve, strict=True))
            same = st.first == chosen and st.pld == pld
            was = st.dead if same else tuple(b == -math.inf for b in thresholds)
            dead = tuple(d or x > b for d, x, b in zip(was, s, thresholds, strict=True))
            total = add_repeatedly(st.delta, delta, k)
            # design: 1.8.0 on; the ladder its first declaration chose: 1.10.0 on
            return RDPState(s, dead, total, chosen, pld, after.design, after.ladder)

        return rdp
    return None


def stepper(config: Any, state: Any, first: Decision) -> Advance | None:
    """``advance(state, k)`` for the filter (``config``) that admitted ``first`` on ``state``:
    the state after k more admissions of the same declaration, each charged ``first``'s
    charge; ``None`` when this module cannot advance that filter exactly (then count with the
    loop). ``first.state`` is ``advance(state, 1)``, which the caller may check."""
    if not first.admitted:
        return None
    reserved = first.outcome == "reserved"
    if isinstance(config, SplitConfig):
        if not isinstance(state, SplitState) or first.sub_budget is None:
            return None
        name = first.sub_budget
        inner = _leaf(
            config.sub_budget(name),
            state.get(name),
            first.requested,
            reserved,
            first.state.get(name) if isinstance(first.state, SplitState) else None,
        )
        if inner is None:
            return None
        leaf = inner

        def split(st: SplitState, k: int) -> SplitState:
            return st.put(name, leaf(st.get(name), k))

        return split
    return _leaf(config, state, first.requested, reserved, first.state)


__all__ = ["Advance", "add_repeatedly", "add_up_repeatedly", "stepper"]
