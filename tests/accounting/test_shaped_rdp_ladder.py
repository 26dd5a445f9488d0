"""``rdp`` ladders shaped at creation (accounting 1.8.0, levels at whole repeats from 1.9.0;
``docs/accounting.md``, *Readings as the smallest of several statements*): the shares and their
sum in exact decimals, a shape that sums to more refused, the levels placed by the first
declaration recomputed here from their definition, configurations stored before (1.7.0, 1.8.0)
keeping their readings bit for bit, and the filter admitting only while the reading stays
within the budget in force."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from odometer_core.accounting import (
    ConfigError,
    admit,
    config_from_json,
    config_to_json,
    initial_state,
    make_config,
    parse_declaration,
    state_from_json,
    state_to_json,
    status,
)
from odometer_core.accounting import conversions as cv
from odometer_core.accounting.exact import ONE, cost_from_float, to_float_down
from odometer_core.accounting.filters import change_budget
from odometer_core.accounting.modes import rdp as rdp_mode
from odometer_core.accounting.modes import rdp_shaped as shaped
from odometer_core.accounting.modes import statements as stm
from odometer_core.accounting.modes.rdp import RDPConfig, RDPState
from odometer_core.accounting.modes.workload import WORKLOAD_SHARE

GAUSSIAN = parse_declaration({"type": "gaussian", "sigma": "20", "sensitivity": 1})
LAPLACE = parse_declaration({"type": "laplace", "scale": "10", "sensitivity": 1})
HISTORY = [GAUSSIAN, GAUSSIAN, LAPLACE, GAUSSIAN, GAUSSIAN, GAUSSIAN, GAUSSIAN, GAUSSIAN]

#: Written by accounting 1.7.0 (the commit before 1.8.0) for make_config("1", "1e-6",
#: "add_remove", {"mode": "rdp"}) and the admissions of HISTORY: the stored configuration (no
#: ``ladder`` field, the 16 orders) and the reading after each admission.
STORED_1_7 = {
    "mode": "rdp",
    "epsilon": "1",
    "delta": "0.000001",
    "relation": "add_remove",
    "final_conversion_delta": "0.000001",
    "delta_approx": "0",
    "orders": [
        "1.5",
        "1.75",
        "2.0",
        "2.5",
        "3.0",
        "4.0",
        "5.0",
        "6.0",
        "8.0",
        "10.0",
        "12.0",
        "16.0",
        "20.0",
        "32.0",
        "48.0",
        "64.0",
    ],
}
READINGS_1_7 = [
    "0.4018350804085625283",
    "0.47228135846644658802",
    "0.57138721466218800327",
    "0.67292851741935377774",
    "0.72401766251580013112",
    "0.7780571472392271426",
    "0.83962547672128895471",
    "0.88234544067626397013",
]
#: The same history on a configuration made by 1.8.0 (shaped, :data:`.rdp_shaped.LADDER_1_8`,
#: levels at multiples of the first declaration): every reading below 1.7.0's.
READINGS_1_8 = [
    "0.27633201944802016082",
    "0.39301415486238816533",
    "0.49973938760465924647",
    "0.56895406347616039878",
    "0.67495463006382472316",
    "0.71853368915197424194",
    "0.76744952907945385157",
    "0.87363523160265177392",
]
#: The same history on a configuration made from 1.9.0 on (34 levels, whole repeats): the
#: Gaussians' readings below 1.8.0's; the third, after the Laplace (work of another kind than
#: the first declaration), above it, read a level higher (the docs say so).
READINGS_1_9 = [
    "0.26469222733069852627",
    "0.37631813785141038365",
    "0.54466434588134604589",
    "0.60732280976747177182",
    "0.66732281036747198578",
    "0.72732281096747208871",
    "0.78732281156747230267",
    "0.83919153942985269535",
]

#: Written by accounting 1.8.0 (before the levels at whole repeats) for make_config("2",
#: "0.000001", "add_remove", {"mode": "rdp"}) and 12 epochs of DP-SGD (N = 10⁶, batch 1024,
#: σ = 1): the reading after each epoch.
EPOCH = parse_declaration(
    {"type": "dp_sgd", "noise_multiplier": "1", "sample_rate": "0.001024", "steps": 977}
)
EPOCH_READINGS_1_8 = [
    "1.5038513243149571608",
    "1.5153175029219201342",
    "1.5287879936734907194",
    "1.538249860135845859",
    "1.5501710648630613321",
    "1.5651908416389868073",
    "1.5741067762912854811",
    "1.5841145745636970866",
    "1.5953479483116153049",
    "1.6079569840181282548",
    "1.6221101480644670723",
    "1.6379965375699787611",
]


def _rdp(eps: str = "1", delta: str = "0.000001") -> RDPConfig:
    config = make_config(eps, delta, "add_remove", {"mode": "rdp"})
    assert isinstance(config, RDPConfig)
    return config


def _before_1_8(config: RDPConfig) -> RDPConfig:
    """The configuration accounting 1.7.0 made: no shape, the 16 orders."""
    acc = {"mode": "rdp", "final_conversion_delta": str(config.final_conversion_delta)}
    rel = config.relation
    return rdp_mode.parse(config.epsilon, config.delta, rel, acc, True, config.branch, None)


def _made_by_1_9(eps: str = "1", delta: str = "0.000001") -> RDPConfig:
    """The configuration accounting 1.9.0 made: the 34-level shape at whole repeats, fixed at
    creation (no ``ladder_rule``: the first declaration does not choose the shape)."""
    stored = config_to_json(_rdp(eps, delta))
    assert stored.pop("ladder_rule") == "first_declaration"  # accounting 1.10.0
    config = config_from_json(stored)
    assert isinstance(config, RDPConfig)
    return config


def _made_by_1_8(eps: str = "1", delta: str = "0.000001") -> RDPConfig:
    """The configuration accounting 1.8.0 made: the 40-level shape, levels at multiples."""
    config = _rdp(eps, delta)
    acc = {"mode": "rdp", "final_conversion_delta": str(config.final_conversion_delta)}
    rel, shape = config.relation, shaped.LADDER_1_8
    return rdp_mode.parse(config.epsilon, config.delta, rel, acc, True, config.branch, shape)


def _readings(config: RDPConfig, history: list[Any]) -> tuple[list[str], Any]:
    state, out = initial_state(config), []
    for declaration in history:
        decision = admit(config, state, declaration)
        assert decision.admitted
        state = decision.state
        out.append(status(config, state)["odometer"]["epsilon"])
    return out, state


# ---------------------------------------------------------------------------- the shares
def test_the_default_shape_and_its_exact_sum() -> None:
    for shape, span in ((shaped.DEFAULT_RDP_LADDER, 34), (shaped.LADDER_1_8, 40)):
        assert (shape.steps, shape.first, shape.span) == (6, Decimal("0.9"), span)
        assert (shape.spread, shape.above, shape.tail) == (
            Decimal("0.095"),
            Decimal("0.001"),
            Decimal("0.004"),
        )
        assert shape.first + shape.spread + shape.above + shape.tail == 1


def test_every_statement_s_share_sums_to_at_most_delta() -> None:
    """The union bound of a shaped filter in force after its first declaration, summed exactly
    (as fractions of the floats the filter converts at): the PLD branch's schedule (at most its
    pool, :func:`.statements.slot`), level 1 of every order at first·w_α of the ladder's pool,
    every placed level k ≠ 1 at weight(k) of it, and the levels the reading never searches
    bounded by their series; the decimals behind them (0.9 + 15·rest ≤ 1, the shape's four
    parts = 1, the branch's pool + the ladder's ≤ δ_c) exactly."""
    config = _rdp("8", "0.00001")
    epoch = parse_declaration(
        {
            "type": "dp_sgd",
            "noise_multiplier": "1.12",
            "sample_rate": "0.004266666666666667",
            "steps": 235,
        }
    )
    decision = admit(config, initial_state(config), epoch)
    assert decision.admitted and isinstance(decision.state, RDPState)
    live = rdp_mode.in_force(config, decision.state)
    assert live.shape is not None and live.design is not None
    # decimals: the weights at level 1, the branch and the ladder's pools
    rest = (ONE - WORKLOAD_SHARE) / 15
    assert WORKLOAD_SHARE + 15 * rest.quantize(Decimal("1e-25"), rounding="ROUND_DOWN") <= 1
    branch = config.branch
    assert branch is not None
    dc = config.final_conversion_delta
    assert stm.pool(branch, dc) + stm.ladder_pool(branch, dc) <= dc
    # floats, summed exactly: level 1 of each order and every placed level
    pool = float(live.ladder_delta)
    total = Fraction(0)
    for w in live.weights:
        if w > 0:
            total += Fraction(math.nextafter(w * pool, 0.0)) * Fraction(live.shape.weight(1))
    found = rdp_mode._statements(live)
    last = live.shape.span + 1
    spans = [st for st in found if 2 <= st.level <= last]
    # whole repeats: one span level per whole number, the spread divided among them
    values = [st.value / live.design[st.index] for st in spans]
    assert len(set(values)) == len(values) <= live.shape.span
    wholes = [round(v / shaped.WHOLE_MARGIN) for v in values if v >= 1]
    assert [v for v in values if v >= 1] == pytest.approx(
        [j * shaped.WHOLE_MARGIN for j in wholes], rel=1e-14
    )
    assert len(found) - len(spans) == live.shape.depth - last + shaped.ABOVE
    even = Fraction(to_float_down(live.shape.spread)) / len(spans)
    total += len(spans) * even * Fraction(pool)
    assert len(spans) * even <= Fraction(live.shape.spread)
    for st in found:
        if st not in spans:
            total += Fraction(live.shape.weight(st.level)) * Fraction(pool)
    assert total < Fraction(pool)
    assert total > Fraction(pool) * Fraction(99, 100)  # most of the pool is in use


def test_a_shape_whose_shares_exceed_the_pool_is_refused() -> None:
    stored = config_to_json(_rdp())
    assert stored["ladder"] == {
        "steps": 6,
        "first": "0.9",
        "span": 34,
        "spread": "0.095",
        "above": "0.001",
    }
    assert stored["levels"] == "whole_repeats"
    for bad in ("whole", None):
        with pytest.raises(ConfigError):
            config_from_json({**stored, "levels": bad})
    with pytest.raises(ConfigError):  # no ladder to place
        config_from_json({k: v for k, v in stored.items() if k != "ladder"})
    stored["ladder"] = {**stored["ladder"], "spread": "0.2"}  # 0.9 + 0.2 + 0.001 > 1
    with pytest.raises(ConfigError):
        config_from_json(stored)
    stored["ladder"] = "steps 6"
    with pytest.raises(ConfigError):
        config_from_json(stored)


def test_a_new_configuration_adds_the_levels_orders_at_weight_zero() -> None:
    config = _rdp()
    assert config.orders == rdp_mode.DEFAULT_RDP_ORDERS + shaped.LEVEL_ORDERS
    assert config.weights[16:] == (0.0,) * len(shaped.LEVEL_ORDERS)
    assert all(b == -math.inf for b in config.thresholds[16:])  # no level 1 there
    fresh = status(config, initial_state(config))["odometer"]
    assert (fresh["epsilon"], fresh["delta"]) == ("0", "0")


# ---------------------------------------------------------------------------- readings
def _independent(config: RDPConfig, state: RDPState) -> Decimal:
    """The reading from the construction's definition, without the module's code: level 1
    (ε_B) where an order of weight > 0 holds S(α) ≤ B(α); level k ≠ 1 at the order of the
    whole grid minimising CKS20 Prop. 12 of n_k·C(α) at δ·weight(k), n_k = N·2^(−(k−1)/6)
    (N·2^(|k|/6) above), N = max B(α)/C(α), C the first declaration's curve. Levels at whole
    repeats (1.9.0): n_k ≥ 1 taken as ⌊n_k⌋(1 + 10⁻⁸), one span level per whole number (the
    first), each at spread/(their number) of the pool."""
    live = rdp_mode.in_force(config, state)
    assert live.shape is not None and state.design is not None and live.thresholds_top
    tops, design, shape = live.thresholds_top, state.design, live.shape
    whole = config_to_json(config).get("levels") == "whole_repeats"
    n = max(b / c for b, c in zip(tops, design, strict=True) if b > 0 and c > 0)
    pool = float(live.ladder_delta)
    best = (
        config.epsilon
        if any(b > 0 and s <= b for s, b in zip(state.rdp, tops, strict=True))
        else Decimal("Infinity")
    )
    placed: list[tuple[float, float]] = []  # (multiple, fraction of the pool)
    for k in [*range(2, shape.depth + 1), *range(-1, -61, -1)]:
        steps = shape.steps  # 6 but for a shape the first declaration chose (1.10.0)
        mult = n * 2.0 ** (-(k - 1) / steps) if k >= 2 else n * 2.0 ** (-k / steps)
        if whole and mult >= 1:
            mult = math.floor(mult) * (1 + 1e-8)
        span = 2 <= k <= shape.span + 1
        if whole and span and any(m == mult for m, _ in placed):
            continue
        placed.append((mult, -1.0 if whole and span else shape.weight(k)))
    kept = sum(1 for _, w in placed if w < 0)
    for mult, weight in placed:
        weight = float(shape.spread) / kept if weight < 0 else weight
        share = math.nextafter(pool * weight * (1 - 1e-12), 0.0)
        values = [mult * c for c in design]
        eps = [
            float(cv.rdp_to_epsilon(np.array([a]), np.array([v]), share)[0])
            for a, v in zip(live.orders, values, strict=True)
        ]
        i = int(np.argmin(eps))
        if state.rdp[i] <= values[i]:
            best = min(best, cost_from_float(eps[i]))
    return best


def test_readings_of_a_gaussian_history_from_the_definition() -> None:
    for config, pinned in (
        (_rdp(), None),
        (_made_by_1_9(), READINGS_1_9),
        (_made_by_1_8(), READINGS_1_8),
    ):
        readings, state = _readings(config, HISTORY)
        assert pinned is None or readings == pinned
        assert isinstance(state, RDPState) and state.first == "20.0" and state.design is not None
        # recomputed from the definition after every admission
        state = initial_state(config)
        for declaration in HISTORY:
            state = admit(config, state, declaration).state
            assert isinstance(state, RDPState)
            ours = Decimal(status(config, state)["odometer"]["epsilon"])
            independent = _independent(config, state)
            assert abs(ours - independent) <= independent * Decimal("1e-12")


def test_every_reading_is_at_least_the_exact_gaussian_epsilon() -> None:
    """Repeats of a Gaussian σ = 60 on (1, 1e-5) until refused: every reading is at least the
    exact ε of the Gaussians released at the reading's δ (Dong–Roth–Su 2022, Cor. 3.3 and
    2.13), and at most 1.59 times it past 10 % of the budget (1.642 under 1.8.0, 2.0–3.2
    before)."""
    config = _rdp("1", "0.00001")
    sigma = parse_declaration({"type": "gaussian", "sigma": "60", "sensitivity": 1})
    state, count, worst = initial_state(config), 0, 0.0
    while (decision := admit(config, state, sigma)).admitted:
        state, count = decision.state, count + 1
        reading = status(config, state)["odometer"]
        exact = cv.gdp_epsilon(math.sqrt(count) / 60, float(reading["delta"]))
        assert float(reading["epsilon"]) >= exact
        if exact >= 0.1:
            worst = max(worst, float(reading["epsilon"]) / exact)
    assert count == 213
    assert 1.55 < worst < 1.59


def test_repeats_read_at_their_whole_number() -> None:
    """Twelve epochs of DP-SGD on (2, 10⁻⁶): after j epochs the reading is the level placed at
    j epochs (N ≈ 95.4: the span's whole numbers are …, 16, 15, 13, 11, 10, 9, …, so every
    j ≤ 11 has one, and 12 is read at 13), equal to the definition's, and below 1.8.0's."""
    config = _made_by_1_9("2", "0.000001")
    state: Any = initial_state(config)
    for j, old in enumerate(EPOCH_READINGS_1_8, start=1):
        state = admit(config, state, EPOCH).state
        reading = status(config, state)["odometer"]
        assert Decimal(reading["epsilon"]) < Decimal(old)
        assert abs(Decimal(reading["epsilon"]) - _independent(config, state)) <= Decimal("1e-12")
        live = rdp_mode.in_force(config, state)
        design = live.design
        assert design is not None
        level = [st for st in rdp_mode._statements(live) if st.level == reading["level"]]
        multiples = [st.value / design[st.index] for st in level]
        held = j if j <= 11 else 13
        assert multiples == pytest.approx([held * shaped.WHOLE_MARGIN], rel=1e-14)


# ---------------------------------------------------------------------------- stored before
def test_a_configuration_stored_by_1_7_keeps_its_readings() -> None:
    """The 1.7.0 configuration read back from its JSON (no ``ladder``) gives, for the same
    admissions, the readings 1.7.0 gave, bit for bit, and writes its states as 1.7.0 did (no
    ``design``); made again as 1.7.0 made it, the same."""
    legacy = _before_1_8(_rdp())
    stored = config_to_json(legacy)
    assert "ladder" not in stored
    assert {k: stored[k] for k in STORED_1_7} == STORED_1_7
    back = config_from_json(json.loads(json.dumps(stored)))
    assert isinstance(back, RDPConfig) and back == legacy
    readings, state = _readings(back, HISTORY)
    assert readings == READINGS_1_7
    written = state_to_json(state)
    assert "design" not in written and state_from_json(back, written) == state
    fresh = _rdp()
    assert all(
        Decimal(new) < Decimal(old) for new, old in zip(READINGS_1_8, READINGS_1_7, strict=True)
    )
    assert config_to_json(fresh)["ladder"]["steps"] == 6


def test_a_configuration_stored_by_1_8_keeps_its_readings() -> None:
    """A 1.8.0 configuration read back from its JSON (the 40-level ``ladder``, no ``levels``)
    gives the readings 1.8.0 gave, bit for bit (the Gaussian history and 12 epochs of DP-SGD,
    both written by 1.8.0), with its levels at multiples of the first declaration."""
    stored = json.loads(json.dumps(config_to_json(_made_by_1_8())))
    assert "levels" not in stored and stored["ladder"]["span"] == 40
    back = config_from_json(stored)
    assert isinstance(back, RDPConfig) and back.levels == shaped.LEVELS_1_8
    assert _readings(back, HISTORY)[0] == READINGS_1_8
    stored = json.loads(json.dumps(config_to_json(_made_by_1_8("2", "0.000001"))))
    epochs = config_from_json(stored)
    assert isinstance(epochs, RDPConfig)
    assert _readings(epochs, [EPOCH] * 12)[0] == EPOCH_READINGS_1_8


def test_a_shaped_state_round_trips_with_its_design() -> None:
    config = _rdp()
    _, state = _readings(config, HISTORY[:3])
    written = json.loads(json.dumps(state_to_json(state)))
    assert len(written["design"]) == len(config.orders)
    assert state_from_json(config, written) == state


# ---------------------------------------------------------------------------- budgets
def test_a_lowered_budget_admits_only_while_the_reading_stays_within_it() -> None:
    config: Any = _rdp()
    state: Any = initial_state(config)
    for declaration in HISTORY[:3]:
        state = admit(config, state, declaration).state
    config, state = change_budget(config, state, "0.7", "0.000001")
    count = 0
    while (decision := admit(config, state, GAUSSIAN)).admitted:
        state, count = decision.state, count + 1
        assert Decimal(status(config, state)["odometer"]["epsilon"]) <= Decimal("0.7")
    assert count >= 1
    # refused: the reading after it would exceed the budget (the same filter at the creation
    # budget admits it, and reads more than 0.7 after it)
    raised, same = change_budget(config, state, "1", "0.000001")
    after = admit(raised, same, GAUSSIAN)
    assert after.admitted
    assert Decimal(status(raised, after.state)["odometer"]["epsilon"]) > Decimal("0.7")
