"""How many more fit: :func:`~odometer_core.accounting.capacity` is exactly the loop of the
core's own admission, up to 10⁶ (docs/accounting.md, *How many more fit*).

The oracle is :func:`reference`: the public :func:`admit` called once per registration on the
state the previous one left, as the service would, never the fast path. Checked over a table
of modes and declarations (every mode, ODP reservations, approximate declarations, workload
grids, dead orders, budget changes, split sub-budgets, decimal sums past the context's 60
digits), with the counts and the next refusal's reason, and the state the fast path advances
to against the loop's; the loop runs to about 10⁶ where the count is near it, in ``rdp``
(binary64 sums) and ``gdp`` (decimal sums); in every mode, and past the limit, with
``ODOMETER_LONG_TESTS=1``. The exact repeated sums of
:mod:`~odometer_core.accounting.fastforward` are checked against plain repeated additions on
many random pairs, binary64 ties, binade and decade crossings and subnormals included; a
block selection's count above 10⁴ against a loop of selection decisions; and the count takes
O(log n) admissions."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import pytest

from odometer_core.accounting import (
    Capacity,
    FilterState,
    admit,
    capacity,
    change_budget,
    fastforward,
    filters,
    initial_state,
    make_config,
    memo,
    parse_declaration,
)
from odometer_core.accounting.blocks import (
    Blocks,
    Selected,
    decide_selection,
    selection_capacity,
)
from odometer_core.accounting.exact import UP
from odometer_core.accounting.fastforward import add_repeatedly, add_up_repeatedly, stepper
from odometer_core.accounting.filters import CAPACITY_LIMIT, AccountingConfig
from odometer_core.accounting.modes.basic import BasicState

LONG = os.environ.get("ODOMETER_LONG_TESTS") == "1"
MILLION = 1_000_000


def reference(
    config: AccountingConfig,
    state: FilterState,
    mechanism: Any,
    limit: int = CAPACITY_LIMIT,
    *,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
) -> tuple[int, str | None, FilterState]:
    """The oracle: registrations decided one after the other by the public :func:`admit`
    (charges memoised as the service memoises them) until a refusal or ``limit`` — the count,
    the refusal's reason (``None`` at the limit) and the state the admitted ones left."""
    declaration = parse_declaration(mechanism)
    count = 0
    with memo.charges():
        while count < limit:
            decision = admit(
                config, state, declaration, sub_budget=sub_budget, conversion_delta=conversion_delta
            )
            if not decision.admitted:
                return count, decision.reason, state
            state, count = decision.state, count + 1
    return count, None, state


def gaussian(sigma: object) -> dict[str, Any]:
    return {"type": "gaussian", "sigma": sigma}


SPLIT = {
    "mode": "split",
    "sub_budgets": [
        {
            "name": "train",
            "budget": {"epsilon": "1", "delta": "1e-7"},
            "accounting": {"mode": "rdp"},
        },
        {
            "name": "stats",
            "budget": {"epsilon": "1", "delta": "0"},
            "accounting": {"mode": "basic"},
        },
    ],
}
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.0001"}, {"name": "high", "epsilon": "0.0003"}],
    "delta": "1e-11",
}


@dataclass(frozen=True)
class Case:
    """A filter (budget, accounting, optional earlier charges and a budget change after them)
    and the declaration to count."""

    accounting: dict[str, Any]
    mechanism: dict[str, Any]
    epsilon: str = "1"
    delta: str = "1e-6"
    before: tuple[dict[str, Any], int] | None = None
    change: tuple[str, str] | None = None
    sub_budget: str | None = None
    conversion_delta: Decimal | None = None
    state: Callable[[AccountingConfig], FilterState] | None = field(default=None, compare=False)

    def filter(self) -> tuple[AccountingConfig, FilterState]:
        config = make_config(self.epsilon, self.delta, "add_remove", self.accounting)
        state = initial_state(config) if self.state is None else self.state(config)
        if self.before is not None:
            mechanism, times = self.before
            count, _, state = reference(config, state, mechanism, times, sub_budget=self.sub_budget)
            assert count == times
        if self.change is not None:
            config, state = change_budget(config, state, *self.change)
        return config, state

    def counted(self, limit: int = CAPACITY_LIMIT) -> Capacity:
        config, state = self.filter()
        return capacity(
            config,
            state,
            parse_declaration(self.mechanism),
            sub_budget=self.sub_budget,
            conversion_delta=self.conversion_delta,
            limit=limit,
        )

    def looped(self, limit: int = CAPACITY_LIMIT) -> tuple[int, str | None, FilterState]:
        config, state = self.filter()
        return reference(
            config,
            state,
            self.mechanism,
            limit,
            sub_budget=self.sub_budget,
            conversion_delta=self.conversion_delta,
        )


def _nearly_full(config: AccountingConfig) -> FilterState:
    """E = 1 − 5000·10⁻⁶⁰, at 60 digits the context's last: each charge of 3·10⁻⁶⁵ then adds
    10⁻⁶⁰ (rounded up), so 5000 fit, where s + k·c would say 1.6·10⁸."""
    return BasicState(spent_epsilon=UP.subtract(Decimal(1), Decimal("5000E-60")))


#: Counts from a few hundred to a few 10⁴ in every mode; what each is, in its id.
TABLE = {
    "basic-pure": Case({"mode": "basic"}, {"type": "pure_dp", "epsilon": "0.001"}, delta="0"),
    "basic-gaussian-delta-bound": Case({"mode": "basic"}, gaussian(300), delta="1e-5"),
    "basic-gaussian-epsilon-bound": Case(
        {"mode": "basic", "conversion_delta": "1e-9"}, gaussian(300), epsilon="10", delta="1e-3"
    ),
    "basic-request-conversion-delta": Case(
        {"mode": "basic"},
        gaussian(300),
        epsilon="10",
        delta="1e-3",
        conversion_delta=Decimal("1e-10"),
    ),
    "basic-odp-reserved-at-worst-cell": Case({"mode": "basic"}, ODP),
    "basic-svt-reserved": Case(
        {"mode": "basic"}, {"type": "svt", "epsilon1": "0.001", "epsilon2": "0.002", "c": 3}, "5"
    ),
    "basic-approx": Case(
        {"mode": "basic"}, {"type": "approx_dp", "epsilon": "0.0001", "delta": "1e-11"}, "3"
    ),
    "basic-60-digit-rounding": Case(
        {"mode": "basic"}, {"type": "pure_dp", "epsilon": "3e-65"}, state=_nearly_full
    ),
    "zcdp-gaussian": Case({"mode": "zcdp"}, gaussian(300)),
    "zcdp-pure": Case({"mode": "zcdp"}, {"type": "pure_dp", "epsilon": "0.003"}),
    "zcdp-approx-delta": Case(
        {"mode": "zcdp", "final_conversion_delta": "5e-7"},
        {"type": "approx_dp", "epsilon": "0.001", "delta": "1e-11"},
    ),
    "zcdp-raised-approx-creation-filter": Case(
        {"mode": "zcdp", "final_conversion_delta": "5e-7"},
        {"type": "zcdp", "rho": "0.00001", "delta": "1e-13"},
        before=(gaussian(30), 10),
        change=("3", "1e-6"),
    ),
    "gdp-gaussian": Case({"mode": "gdp"}, gaussian(300)),
    "gdp-composed": Case(
        {"mode": "gdp"},
        {"type": "composed", "mechanisms": [gaussian(300)] * 3 + [{"type": "gdp", "mu": "0.001"}]},
    ),
    "gdp-lowered": Case(
        {"mode": "gdp"},
        gaussian(300),
        epsilon="2",
        before=(gaussian(30), 5),
        change=("1.5", "1e-6"),
    ),
    "rdp-gaussian-orders-die": Case({"mode": "rdp"}, gaussian(300)),
    "rdp-laplace": Case({"mode": "rdp"}, {"type": "laplace", "scale": 300}),
    "rdp-dp-sgd": Case(
        {"mode": "rdp"},
        {"type": "dp_sgd", "sample_rate": 0.001, "noise_multiplier": 1.2, "steps": 10},
    ),
    "rdp-subsampled": Case(
        {"mode": "rdp"},
        {"type": "subsampled", "scheme": "poisson", "rate": 0.01, "mechanism": gaussian(2)},
    ),
    "rdp-approx-delta": Case(
        {"mode": "rdp", "final_conversion_delta": "5e-7"},
        {"type": "approx_dp", "epsilon": "0.001", "delta": "1e-11"},
    ),
    "rdp-odp-worst-cell": Case(
        {"mode": "rdp", "final_conversion_delta": "5e-7"},
        {**ODP, "cells": [{"name": "a", "epsilon": "0.001"}, {"name": "b", "epsilon": "0.003"}]},
    ),
    "rdp-workload-grid": Case(
        {"mode": "rdp", "workload": [{"mechanism": gaussian(300), "count": 1000}]}, gaussian(300)
    ),
    "rdp-own-orders": Case({"mode": "rdp", "orders": [2, 8, 32, 256]}, gaussian(300)),
    "rdp-user-curve-infinite-above-its-orders": Case(
        {"mode": "rdp"},
        {"type": "rdp", "orders": [4, 10], "values": ["0.004", "0.01"]},
        epsilon="10",
    ),
    "rdp-lowered-capped-thresholds": Case(
        {"mode": "rdp"},
        gaussian(300),
        epsilon="2",
        before=(gaussian(30), 20),
        change=("1.5", "1e-6"),
    ),
    "rdp-raised-approx-creation-filter": Case(
        {"mode": "rdp", "final_conversion_delta": "5e-7"},
        {"type": "approx_dp", "epsilon": "0.001", "delta": "1e-13"},
        before=(gaussian(30), 5),
        change=("3", "1e-6"),
    ),
    "zcdp-tree-aggregation": Case(
        {"mode": "zcdp"},
        {"type": "tree_aggregation", "noise_multiplier": 300, "step_counts": [100, 50]},
    ),
    "rdp-repeat-and-select": Case(
        {"mode": "rdp"},
        {
            "type": "repeat_and_select",
            "distribution": "truncated_negative_binomial",
            "mean": 10,
            "shape": 1,
            "mechanism": gaussian(300),
        },
    ),
    "rdp-mixture-of-gaussians": Case(
        {"mode": "rdp"},
        {
            "type": "mixture_of_gaussians",
            "standard_deviation": 30,
            "sensitivities": [0, 1],
            "sampling_probs": ["0.9", "0.1"],
        },
    ),
    "basic-mixture-of-gaussians": Case(
        {"mode": "basic"},
        {
            "type": "mixture_of_gaussians",
            "standard_deviation": 30,
            "sensitivities": [0, 1],
            "sampling_probs": ["0.9", "0.1"],
        },
        delta="1e-5",
    ),
    "split-rdp": Case(SPLIT, gaussian(300), epsilon="2", sub_budget="train"),
    "split-basic": Case(
        SPLIT,
        {"type": "laplace", "scale": 1000},
        epsilon="2",
        sub_budget="stats",
        before=({"type": "laplace", "scale": 10}, 3),
    ),
}


@pytest.mark.parametrize("case", TABLE.values(), ids=TABLE.keys())
def test_capacity_is_the_loop_of_admit(case: Case) -> None:
    """The count, the next refusal's reason, and the state after the count: the loop's."""
    count, reason, after = case.looped()
    assert 10 <= count < MILLION and reason is not None
    assert case.counted() == Capacity(count, False, reason)
    # the fast path's state after `count` admissions is the loop's, sum for sum
    config, state = case.filter()
    declaration = parse_declaration(case.mechanism)
    with memo.charges():
        first = admit(
            config,
            state,
            declaration,
            sub_budget=case.sub_budget,
            conversion_delta=case.conversion_delta,
        )
        advance = stepper(config, state, first)
    assert advance is not None and advance(state, count) == after
    # a limit at, below and above the count says "at least" exactly when it binds
    for limit in (count - 1, count, count + 1):
        assert case.counted(limit) == (
            Capacity(limit, True, None) if limit <= count else Capacity(count, False, reason)
        )


def test_decimal_rounding_past_60_digits_is_the_loops() -> None:
    """Where the context rounds, s + k·c is not the loop's sum: 5000 fit, not 1.6·10⁸."""
    assert TABLE["basic-60-digit-rounding"].counted() == Capacity(
        5000, False, "epsilon budget exceeded"
    )


#: The loop runs to about 10⁶ for these (a few seconds each: 15 s for ``rdp``'s); the rest
#: of the table stays below 10⁵, and "at least" at 10⁶ is checked over HTTP
#: (``tests/api/test_fit_at_levels.py``) and with smaller limits above.
NEAR_A_MILLION = {
    "rdp-gaussian": Case({"mode": "rdp"}, gaussian(4995)),
    "gdp-gaussian": Case({"mode": "gdp"}, gaussian(4245)),
}
NEAR_A_MILLION_LONG = {
    "basic-pure": Case({"mode": "basic"}, {"type": "pure_dp", "epsilon": "0.0000010000001"}),
    "basic-odp": Case(
        {"mode": "basic"},
        {
            "type": "odp",
            "cells": [
                {"name": "a", "epsilon": "0.0000005"},
                {"name": "b", "epsilon": "0.0000010000001"},
            ],
            "delta": "1e-18",
        },
    ),
    "zcdp-gaussian": Case({"mode": "zcdp"}, gaussian(4548)),
    "gdp-at-the-limit": Case({"mode": "gdp"}, gaussian(5000)),
    "rdp-at-the-limit": Case({"mode": "rdp"}, gaussian(4999)),
    "split-rdp": Case(SPLIT, gaussian(3500), epsilon="2", sub_budget="train"),
}
LONG_CASES = [
    pytest.param(c, id=k, marks=pytest.mark.skipif(not LONG, reason="ODOMETER_LONG_TESTS=1"))
    for k, c in NEAR_A_MILLION_LONG.items()
]


@pytest.mark.parametrize(
    "case", [*(pytest.param(c, id=k) for k, c in NEAR_A_MILLION.items()), *LONG_CASES]
)
def test_capacity_near_a_million_is_the_loop_of_admit(case: Case) -> None:
    """The loop of about 10⁶ admissions against the search's count, and against the state
    the fast path advances to in one go."""
    count, reason, after = case.looped()
    assert count > 400_000
    assert case.counted() == Capacity(count, reason is None, reason)
    config, state = case.filter()
    with memo.charges():
        first = admit(config, state, parse_declaration(case.mechanism), sub_budget=case.sub_budget)
        advance = stepper(config, state, first)
    assert advance is not None and advance(state, count) == after


def test_the_count_takes_a_logarithmic_number_of_admissions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """About 2·log₂ n admissions for a count near 10⁶, not n."""
    calls = 0
    real = filters.admit

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(filters, "admit", counting)
    found = NEAR_A_MILLION["rdp-gaussian"].counted()
    assert found.count > 900_000 and calls <= 2 * math.ceil(math.log2(MILLION)) + 2


def test_a_block_selection_counts_the_fewest_any_block_admits_above_ten_thousand() -> None:
    """Two histories in one selection: the count is the smaller one's, above 10⁴, and it is
    what deciding the selection over and over admits."""
    config = make_config("1", "0.000001", "add_remove", {"mode": "zcdp"})
    blocks = Blocks().open(0, 1000, initial_state(config))
    blocks = decide_selection(config, blocks, [(10, 20)], parse_declaration(gaussian(30))).blocks
    small = parse_declaration(gaussian(500))
    selected = Selected(config, blocks, ((0, 30),))
    found = selection_capacity(selected, small)
    assert found.count > 10_000 and found.reason == "rho budget exceeded"
    # the fewest of the two histories, each the loop's
    counts = {reference(config, run.state, gaussian(500))[0] for run in blocks.runs}
    assert len(counts) == 2 and found.count == min(counts)
    # and exactly that many selections are admitted, then a refusal
    admitted = 0
    with memo.charges():
        while True:
            decided = decide_selection(config, blocks, [(0, 30)], small)
            if not decided.admitted:
                break
            blocks, admitted = decided.blocks, admitted + 1
    assert admitted == found.count


# ---------------------------------------------------------------------------- exact sums
def _float_loop(total: float, amount: float, times: int) -> float:
    for _ in range(times):
        total = math.nextafter(total + amount, math.inf)
    return total


def _decimal_loop(total: Decimal, amount: Decimal, times: int) -> Decimal:
    for _ in range(times):
        total = UP.add(total, amount)
    return total


def _float_pairs(rng: random.Random) -> list[tuple[float, float]]:
    """(s, c) pairs: ordinary; exact ties (c/ulp(s) an odd multiple of ½); just below a
    binade's top; from zero; subnormals; large values near the top of the range."""
    pairs: list[tuple[float, float]] = []
    for _ in range(400):
        pairs.append(
            (rng.random() * 10.0 ** rng.randint(-6, 6), rng.random() * 10.0 ** rng.randint(-9, 3))
        )
    for _ in range(400):
        s = rng.uniform(1, 2) * 2.0 ** rng.randint(-40, 40)
        e = math.frexp(math.ulp(s))[1] - 1
        pairs.append((s, math.ldexp(2 * rng.randrange(0, 2000) + 1, e - 1)))
    for _ in range(300):
        s = 2.0 ** rng.randint(-30, 30)
        s -= math.ulp(s) * rng.randint(0, 50)
        pairs.append((s, math.ulp(s) * rng.choice([0.25, 0.5, 1.5, 2.5, 0.4999, 1.0, 3.0, 7.5])))
    for _ in range(200):
        pairs.append((0.0, rng.random() * 2.0 ** rng.randint(-1074, 10)))
    subnormal = [0.0, 5e-324, 1e-323, 1.5e-320, 2.225073858507201e-308, 2.2250738585072014e-308]
    for _ in range(200):
        pairs.append((rng.choice(subnormal), rng.choice([0.0, *subnormal[1:], 3e-300])))
    for _ in range(50):
        pairs.append((1.79e308 - rng.random() * 1e300, rng.random() * 1e294))
    pairs += [(math.inf, 1.0), (1.0, math.inf), (0.0, 0.0)]
    return pairs


def test_repeated_binary64_sums_are_the_loops() -> None:
    """S ← nextafter(S + c, +∞) k times, against doing it: ties to even, binade crossings,
    subnormals, overflow to +∞."""
    rng = random.Random(20240601)
    for s, c in _float_pairs(rng):
        k = rng.choice([0, 1, 2, 3, rng.randint(4, 4000)])
        assert add_up_repeatedly(s, c, k) == _float_loop(s, c, k), (s, c, k)
    for s, c in [(0.0, 1e-3), (1.0, 1e-10), (0.5, math.ulp(0.5) * 2.5), (3.0, 1.1e-16)]:
        assert add_up_repeatedly(s, c, MILLION) == _float_loop(s, c, MILLION), (s, c)


def test_repeated_decimal_sums_are_the_loops() -> None:
    """add_up(s, c) k times at 60 digits, rounded up: exact sums, decade crossings, and sums
    where the context rounds every step."""
    rng = random.Random(20240602)
    for i in range(1500):
        shape = i % 3
        if shape == 0:
            s = Decimal(rng.randint(0, 10**6)).scaleb(-rng.randint(0, 8))
            c = Decimal(rng.randint(1, 10**6)).scaleb(-rng.randint(0, 12))
        elif shape == 1:
            s = Decimal(rng.randint(0, 10**30)).scaleb(-rng.randint(0, 30))
            c = Decimal(rng.randint(1, 10**20)).scaleb(-rng.randint(20, 300))
        else:
            s = UP.plus(Decimal(rng.randint(1, 10**60 - 1)).scaleb(-rng.randint(0, 70), UP))
            c = Decimal(rng.randint(1, 10**20)).scaleb(-rng.randint(0, 100))
        k = rng.choice([0, 1, 2, rng.randint(3, 1500)])
        assert add_repeatedly(s, c, k) == _decimal_loop(s, c, k), (s, c, k)
    for s, c in [(Decimal(0), Decimal("0.1")), (Decimal("0.5"), Decimal("1e-65"))]:
        assert add_repeatedly(s, c, MILLION) == _decimal_loop(s, c, MILLION)
    assert add_repeatedly(Decimal(1), Decimal("Infinity"), 3) == Decimal("Infinity")


def test_a_filter_the_fast_path_cannot_advance_is_counted_by_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mode without an exact advance (none today) is counted by the loop, to its limit."""
    monkeypatch.setattr(fastforward, "stepper", lambda *args: None)
    case = TABLE["zcdp-gaussian"]
    count, reason, _ = case.looped()
    assert case.counted() == Capacity(count, False, reason)
    far = replace(case, mechanism=gaussian(5000))
    assert far.counted() == Capacity(filters.LOOP_LIMIT, True, None)
