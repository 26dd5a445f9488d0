"""The cell of a released output (:func:`cell_from_output`) against independent simulations.

For each template a run of the mechanism is simulated here as its algorithm is written in
Hartmann et al. 2022 (Algorithm 2 for SVT, Definition 9 / Lemma 10 for PTR, Algorithm 3 for the
iterative mechanism, Algorithm 5 for the tested release). The simulation tracks the run's cell
itself (how many ⊤ it answered, whether it released, where it stopped) and its ε from the
lemma, in exact fractions; the released output alone must give the same cell, and settling a
reservation at that cell must charge exactly the partition's ε of the cell, which is the
lemma's ε rounded up by less than 10⁻⁴⁰.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odometer_core.accounting import cell_from_output, parse_declaration
from odometer_core.accounting.declarations import Declaration, DeclarationError, OdpCapable
from odometer_core.accounting.filters import admit, initial_state, make_config, settle

EPSILONS = st.sampled_from(["0.01", "0.05", "0.1", "0.3", "1", "2.5"]).map(Fraction)


def _text(value: Fraction) -> str:
    """A sampled ε (a terminating decimal) as the declaration's decimal string."""
    return str(Decimal(value.numerator) / value.denominator)


def _charged(decl: Declaration, cell: str) -> Decimal:
    """The ε a reservation of ``decl`` settled at ``cell`` charges (basic mode; a partition
    of one cell is charged at once: there is nothing to settle)."""
    cfg = make_config(10_000, "0.5", "add_remove", None)
    d = admit(cfg, initial_state(cfg), decl)
    assert isinstance(decl, OdpCapable)
    if len(decl.partition().cells) == 1:
        assert d.outcome == "accepted"
        return Decimal(d.charge.to_json()["epsilon"])
    assert d.outcome == "reserved" and d.reservation is not None
    charge = settle(cfg, d.state, d.reservation, cell).charge.to_json()
    return Decimal(charge["epsilon"])


def _check_charge(decl: Declaration, cell: str, lemma: Fraction) -> None:
    assert isinstance(decl, OdpCapable)
    declared = decl.partition().epsilon_of(cell)
    assert declared is not None
    assert _charged(decl, cell) == declared
    assert Fraction(declared) >= lemma  # never under-charged
    assert Fraction(declared) - lemma < Fraction(1, 10**40)


# ---------------------------------------------------------------------------- SVT (Algorithm 2)
def _svt_run(
    c: int, values: list[tuple[int, int]], noise: list[int], stop: int
) -> tuple[list[bool], int]:
    """Algorithm 2: queries ``values`` (q_i(x), T_i) with noise ν_i and a shared ρ = 0 (the
    noise only decides the answers); the stream sends STOP after ``stop`` queries. Returns the
    answers and the run's own count of ⊤."""
    answers: list[bool] = []
    count = 0
    for i, (q, t) in enumerate(values):
        if i == stop or count >= c:  # line 4
            break
        if q + noise[i] >= t:  # line 7
            answers.append(True)
            count += 1
        else:
            answers.append(False)
    return answers, count


@st.composite
def svt_runs(draw: st.DrawFn) -> tuple[dict[str, Any], list[bool], int]:
    c = draw(st.integers(1, 12))
    n = draw(st.integers(0, 40))
    values = draw(
        st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), min_size=n, max_size=n)
    )
    noise = draw(st.lists(st.integers(-4, 4), min_size=n, max_size=n))
    stop = draw(st.integers(0, n))
    e1, e2 = draw(EPSILONS), draw(EPSILONS)
    answers, count = _svt_run(c, values, noise, stop)
    decl: dict[str, Any] = {"type": "svt", "epsilon1": _text(e1), "epsilon2": _text(e2), "c": c}
    return decl, answers, count


@settings(max_examples=300, deadline=None)
@given(svt_runs())
def test_svt_cell_is_the_number_of_tops_of_the_run(
    run: tuple[dict[str, Any], list[bool], int],
) -> None:
    payload, answers, count = run
    decl = parse_declaration(payload)
    cell = cell_from_output(decl, answers)
    assert cell == f"tops={count}"
    c = int(payload["c"])
    # Lemma 8: ε(S_c') = ε₁ + (c'/c)·ε₂
    lemma = Fraction(payload["epsilon1"]) + Fraction(count, c) * Fraction(payload["epsilon2"])
    _check_charge(decl, cell, lemma)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.data())
def test_svt_answers_after_the_cutoff_are_impossible(c: int, data: st.DataObject) -> None:
    """A vector with an answer after the c-th ⊤ cannot come out of Algorithm 2 (line 4)."""
    prefix: list[bool] = []
    for answer in data.draw(st.lists(st.booleans(), max_size=20)):
        if answer and sum(prefix) + 1 >= c:
            break
        prefix.append(answer)
    run = prefix + [True] * (c - sum(prefix))  # a complete run: it ends at its c-th ⊤
    after = data.draw(st.lists(st.booleans(), min_size=1, max_size=5))
    output = run + after
    decl = parse_declaration({"type": "svt", "epsilon1": "0.1", "epsilon2": "0.2", "c": c})
    with pytest.raises(DeclarationError) as exc:
        cell_from_output(decl, output)
    assert exc.value.field == "output"
    assert f"answer {len(run)} comes after that" in exc.value.detail


@pytest.mark.parametrize(
    "output", ["TFT", b"\x01", 3, None, {"answers": [True]}, [True, 1], [0], [None], ["true"]]
)
def test_svt_outputs_that_are_not_answer_vectors_are_refused(output: Any) -> None:
    decl = parse_declaration({"type": "svt", "epsilon1": "0.1", "epsilon2": "0.2", "c": 2})
    with pytest.raises(DeclarationError):
        cell_from_output(decl, output)


# ---------------------------------------------------------------------------- PTR (Def. 9)
released_values = st.one_of(
    st.integers(-(10**9), 10**9),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.dictionaries(st.sampled_from(["median", "iqr", "n"]), st.integers(), max_size=3),
    st.lists(st.integers(), max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 2]), EPSILONS, st.booleans(), released_values)
def test_ptr_cell_is_value_or_bottom(tests: int, eps: Fraction, passed: bool, value: Any) -> None:
    """A PTR function returns ⊥ when its test fails and the released value otherwise; the
    value cell costs (t + 1)ε and ⊥ costs tε (Def. 9 for t = 1, Lemma 10 for t = 2)."""
    decl = parse_declaration({"type": "ptr", "epsilon": _text(eps), "delta": "0", "tests": tests})
    output = value if passed else None
    cell = cell_from_output(decl, output)
    assert cell == ("value" if passed else "bottom")
    _check_charge(decl, cell, (tests + 1 if passed else tests) * eps)


@pytest.mark.parametrize("output", [True, False])
def test_ptr_refuses_a_boolean(output: bool) -> None:
    decl = parse_declaration({"type": "ptr", "epsilon": "0.1", "delta": "0"})
    with pytest.raises(DeclarationError, match="not a boolean"):
        cell_from_output(decl, output)


# ---------------------------------------------------------------------------- iterative (Alg. 3)
@st.composite
def iterative_runs(draw: st.DrawFn) -> tuple[dict[str, Any], int, list[int]]:
    points = sorted(draw(st.sets(st.integers(1, 500), min_size=1, max_size=8)))
    # h^{k_i} for i < n: whether the run stops at k_i (Algorithm 3, lines 3-6)
    criteria = draw(st.lists(st.booleans(), min_size=len(points) - 1, max_size=len(points) - 1))
    step = next((k for k, h in zip(points, criteria, strict=False) if h), points[-1])
    eps = draw(EPSILONS)
    payload = {
        "type": "iterative",
        "step_epsilon": _text(eps),
        "step_delta": "0",
        "stopping_points": points,
    }
    return payload, step, points


@settings(max_examples=200, deadline=None)
@given(iterative_runs())
def test_iterative_cell_is_the_stopping_point(run: tuple[dict[str, Any], int, list[int]]) -> None:
    payload, step, _ = run
    decl = parse_declaration(payload)
    cell = cell_from_output(decl, step)
    assert cell == f"stop={step}"
    # Lemma 11 with basic composition: ε^k = k·ε_step
    _check_charge(decl, cell, step * Fraction(payload["step_epsilon"]))


@settings(max_examples=200, deadline=None)
@given(iterative_runs(), st.integers(-10, 2000))
def test_iterative_steps_that_are_not_stopping_points_are_refused(
    run: tuple[dict[str, Any], int, list[int]], step: int
) -> None:
    payload, _, points = run
    if step in points:
        return
    decl = parse_declaration(payload)
    with pytest.raises(DeclarationError) as exc:
        cell_from_output(decl, step)
    beyond = step > points[-1]
    assert ("beyond the last stopping point" in exc.value.detail) == beyond


@pytest.mark.parametrize("output", ["10", 10.0, True, None, [10]])
def test_iterative_refuses_what_is_not_an_integer(output: Any) -> None:
    decl = parse_declaration(
        {"type": "iterative", "step_epsilon": "0.1", "step_delta": "0", "stopping_points": [10]}
    )
    with pytest.raises(DeclarationError, match="an integer"):
        cell_from_output(decl, output)


# ---------------------------------------------------------------------------- tested release
@settings(max_examples=100, deadline=None)
@given(EPSILONS, EPSILONS, st.booleans(), st.booleans())
def test_tested_release_cell_is_the_verdict(
    e1: Fraction, e2: Fraction, passed: bool, as_null: bool
) -> None:
    """Algorithm 5 releases the model when the test passes and ⊥ otherwise (Corollary 18:
    released ε₁, ⊥ ε₂ with ε₁ ≥ ε₂); ⊥ may be sent as the verdict ``false`` or as ``null``."""
    high, low = max(e1, e2), min(e1, e2)
    decl = parse_declaration(
        {
            "type": "tested_release",
            "epsilon_release": _text(high),
            "epsilon_bottom": _text(low),
        }
    )
    output = True if passed else (None if as_null else False)
    cell = cell_from_output(decl, output)
    assert cell == ("released" if passed else "bottom")
    _check_charge(decl, cell, high if passed else low)


@pytest.mark.parametrize("output", ["passed", 1, 0, [True], {"verdict": True}])
def test_tested_release_refuses_what_is_not_a_verdict(output: Any) -> None:
    decl = parse_declaration(
        {"type": "tested_release", "epsilon_release": "0.2", "epsilon_bottom": "0.1"}
    )
    with pytest.raises(DeclarationError, match="verdict"):
        cell_from_output(decl, output)


# ---------------------------------------------------------------------------- the rest
def test_a_plain_odp_declaration_is_settled_by_naming_its_cell() -> None:
    decl = parse_declaration({"type": "odp", "cells": [{"name": "a", "epsilon": "1"}]})
    with pytest.raises(DeclarationError, match="send 'cell' instead of 'output'"):
        cell_from_output(decl, "a")


def test_a_kind_without_a_partition_has_no_output_cell() -> None:
    decl = parse_declaration({"type": "pure_dp", "epsilon": "1"})
    with pytest.raises(DeclarationError, match="no output-dependent partition"):
        cell_from_output(decl, 1)
