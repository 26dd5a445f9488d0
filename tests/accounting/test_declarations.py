"""Declarations: closed registry, validation, canonical JSON."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from odometer_core.accounting import declarations as dc
from odometer_core.accounting.declarations import (
    KINDS,
    PTR,
    SVT,
    DeclarationError,
    Iterative,
    OdpCapable,
    parse_declaration,
)

EXAMPLES: list[dict[str, Any]] = [
    {"type": "pure_dp", "epsilon": "0.1"},
    {"type": "approx_dp", "epsilon": "1", "delta": "1E-7"},
    {"type": "zcdp", "rho": "0.5", "xi": "0", "delta": "0"},
    {"type": "rdp", "orders": ["2", "4", "8"], "values": ["0.1", "0.2", "0.4"]},
    {"type": "gdp", "mu": "0.5"},
    {"type": "mcdp", "mu": "0.3", "tau": "0.2"},
    {
        "type": "odp",
        "cells": [{"name": "none", "epsilon": "0.2"}, {"name": "some", "epsilon": "0.5"}],
        "delta": "0",
    },
    {"type": "gaussian", "sigma": "4", "sensitivity": "1"},
    {"type": "laplace", "scale": "2", "sensitivity": "1"},
    {"type": "randomized_response", "epsilon": "1"},
    {"type": "exponential", "epsilon": "0.5"},
    {"type": "discrete_laplace", "scale": "2", "sensitivity": "1"},
    {"type": "discrete_gaussian", "sigma": "4", "sensitivity": "1"},
    {
        "type": "report_noisy_max",
        "noise": "gumbel",
        "scale": "10",
        "sensitivity": "1",
        "monotonic": False,
    },
    {
        "type": "report_noisy_max",
        "noise": "exponential",
        "scale": "10",
        "sensitivity": "2",
        "monotonic": True,
    },
    {
        "type": "subsampled",
        "scheme": "poisson",
        "rate": "0.01",
        "mechanism": {"type": "gaussian", "sigma": "1.1", "sensitivity": "1"},
    },
    {
        "type": "subsampled",
        "scheme": "without_replacement",
        "m": 10,
        "n": 1000,
        "mechanism": {"type": "pure_dp", "epsilon": "1"},
    },
    {
        "type": "composed",
        "mechanism": {"type": "laplace", "scale": "1", "sensitivity": "1"},
        "count": 10,
    },
    {
        "type": "composed",
        "mechanisms": [
            {"type": "pure_dp", "epsilon": "0.1"},
            {"type": "gaussian", "sigma": "3", "sensitivity": "1"},
        ],
    },
    {"type": "svt", "epsilon1": "0.5", "epsilon2": "1", "c": 4},
    {"type": "ptr", "epsilon": "0.5", "delta": "1E-6", "tests": 2},
    {
        "type": "iterative",
        "step_epsilon": "0.01",
        "step_delta": "1E-7",
        "stopping_points": [10, 20, 30],
    },
    {"type": "tested_release", "epsilon_release": "1", "epsilon_bottom": "0.1", "delta": "0"},
    {"type": "tree_aggregation", "noise_multiplier": "1.1", "step_counts": [100, 60]},
    {
        "type": "repeat_and_select",
        "distribution": "truncated_negative_binomial",
        "mean": "10",
        "shape": "1",
        "mechanism": {"type": "gaussian", "sigma": "4", "sensitivity": "1"},
    },
    {
        "type": "repeat_and_select",
        "distribution": "poisson",
        "mean": "5",
        "mechanism": {"type": "pure_dp", "epsilon": "0.1"},
    },
    {
        "type": "dp_sgd",
        "noise_multiplier": "1.1",
        "sample_rate": "0.01",
        "steps": 10000,
        "delta": "0.00001",
    },
    {
        "type": "mixture_of_gaussians",
        "standard_deviation": "2",
        "sensitivities": ["0", "1", "2"],
        "sampling_probs": ["0.81", "0.18", "0.01"],
    },
    {
        "type": "sampled_with_replacement",
        "m": 10,
        "n": 1000,
        "mechanism": {"type": "gaussian", "sigma": "3", "sensitivity": "1"},
    },
    {
        "type": "truncated_subsampled_gaussian",
        "dataset_size": 10000,
        "sampling_probability": "0.01",
        "truncated_batch_size": 150,
        "noise_multiplier": "2",
    },
]


def test_every_kind_has_an_example() -> None:
    assert {e["type"] for e in EXAMPLES} == set(KINDS)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: str(e["type"]))
def test_canonical_json_round_trips(example: dict[str, Any]) -> None:
    decl = parse_declaration(example)
    again = parse_declaration(decl.to_json())
    assert again == decl
    assert again.to_json() == decl.to_json()
    # numbers given as JSON numbers mean the same as decimal text
    assert parse_declaration(_numbers_as_floats(example)) == decl


def _numbers_as_floats(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {
            k: (
                v
                if k in ("type", "name", "scheme", "noise", "distribution")
                else _numbers_as_floats(v)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_numbers_as_floats(v) for v in obj]
    if isinstance(obj, str):
        return float(obj)
    return obj


def test_svt_cells_follow_lemma_8() -> None:
    decl = parse_declaration({"type": "svt", "epsilon1": "0.5", "epsilon2": "1", "c": 4})
    assert isinstance(decl, SVT)
    cells = dict(decl.partition().cells)
    assert cells == {f"tops={k}": Decimal("0.5") + Decimal(k) / 4 for k in range(5)}
    assert decl.partition().delta == 0
    assert decl.partition().worst_epsilon == Decimal("1.5")


def test_svt_rounds_cells_up_for_non_terminating_fractions() -> None:
    decl = parse_declaration({"type": "svt", "epsilon1": "0", "epsilon2": "1", "c": 3})
    assert isinstance(decl, SVT)
    eps = dict(decl.partition().cells)["tops=1"]
    assert eps > Decimal(1) / Decimal(3) - Decimal("1e-50")
    assert eps * 3 >= 1


def test_ptr_and_iqr_cells() -> None:
    one = parse_declaration({"type": "ptr", "epsilon": "0.5", "delta": "1e-6"})
    two = parse_declaration({"type": "ptr", "epsilon": "0.5", "delta": "1e-6", "tests": 2})
    assert isinstance(one, PTR) and isinstance(two, PTR)
    assert dict(one.partition().cells) == {"value": Decimal(1), "bottom": Decimal("0.5")}
    assert dict(two.partition().cells) == {"value": Decimal("1.5"), "bottom": Decimal(1)}
    assert two.partition().delta == Decimal("1e-6")


def test_iterative_reserves_delta_of_every_stopping_point() -> None:
    decl = parse_declaration(
        {
            "type": "iterative",
            "step_epsilon": "0.01",
            "step_delta": "1e-7",
            "stopping_points": [10, 20, 100],
        }
    )
    assert isinstance(decl, Iterative)
    part = decl.partition()
    assert dict(part.cells) == {
        "stop=10": Decimal("0.1"),
        "stop=20": Decimal("0.2"),
        "stop=100": Decimal(1),
    }
    assert part.delta == Decimal("1.3e-5")  # (10 + 20 + 100) · 1e-7


def test_tested_release_needs_ordering() -> None:
    decl = parse_declaration(
        {"type": "tested_release", "epsilon_release": 1, "epsilon_bottom": 0.1}
    )
    assert isinstance(decl, dc.TestedRelease) and isinstance(decl, OdpCapable)
    with pytest.raises(DeclarationError, match="Corollary 18"):
        parse_declaration({"type": "tested_release", "epsilon_release": 0.1, "epsilon_bottom": 1})


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"type": "pure_dp"}, "missing field 'epsilon'"),
        ({"type": "pure_dp", "epsilon": -1}, "must be ≥ 0"),
        ({"type": "pure_dp", "epsilon": float("nan")}, "finite"),
        ({"type": "pure_dp", "epsilon": float("inf")}, "finite"),
        ({"type": "pure_dp", "epsilon": "1e309"}, "out of range"),
        ({"type": "pure_dp", "epsilon": True}, "must be a number"),
        ({"type": "pure_dp", "epsilon": None}, "must be a number"),
        ({"type": "pure_dp", "epsilon": "0.1", "extra": 1}, "unknown field"),
        ({"type": "pure_dp", "epsilon": 1e7}, "≤"),
        ({"type": "approx_dp", "epsilon": 1, "delta": 1}, "must be < 1"),
        ({"type": "rdp", "orders": [1, 2], "values": [0.1, 0.2]}, "orders must be > 1"),
        ({"type": "rdp", "orders": [2, 3], "values": [0.3, 0.2]}, "non-decreasing"),
        ({"type": "rdp", "orders": [3, 2], "values": [0.1, 0.2]}, "strictly increasing"),
        ({"type": "rdp", "orders": [], "values": []}, "must not be empty"),
        ({"type": "rdp", "orders": [2] * 300, "values": [1] * 300}, "more than"),
        (
            {"type": "odp", "cells": [{"name": "a", "epsilon": 1}, {"name": "a", "epsilon": 2}]},
            "duplicate",
        ),
        ({"type": "odp", "cells": [{"name": "bad name!", "epsilon": 1}]}, "cell names"),
        (
            {"type": "odp", "cells": [{"name": f"c{i}", "epsilon": 1} for i in range(2000)]},
            "more than",
        ),
        (
            {
                "type": "subsampled",
                "scheme": "poisson",
                "rate": 1.5,
                "mechanism": {"type": "pure_dp", "epsilon": 1},
            },
            "≤ 1",
        ),
        (
            {
                "type": "subsampled",
                "scheme": "without_replacement",
                "m": 5,
                "n": 3,
                "mechanism": {"type": "pure_dp", "epsilon": 1},
            },
            r"\[0, 3\]",
        ),
        (
            {
                "type": "subsampled",
                "scheme": "poisson",
                "rate": 0.1,
                "mechanism": {"type": "svt", "epsilon1": 1, "epsilon2": 1, "c": 1},
            },
            "ODP",
        ),
        ({"type": "composed", "mechanism": {"type": "pure_dp", "epsilon": 1}, "count": 0}, r"\[1,"),
        ({"type": "dp_sgd", "noise_multiplier": 0, "sample_rate": 0.01, "steps": 10}, "> 0"),
        ({"type": "dp_sgd", "noise_multiplier": 1, "sample_rate": 0.01, "steps": 1.5}, "integer"),
        ({"type": "__import__", "epsilon": 1}, "unknown mechanism type"),
        ({"type": "os.system"}, "unknown mechanism type"),
        ("pure_dp", "JSON object"),
    ],
)
def test_invalid_declarations_are_rejected(payload: object, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        parse_declaration(payload)


def test_nesting_depth_is_bounded() -> None:
    obj: dict[str, Any] = {"type": "pure_dp", "epsilon": 1}
    for _ in range(6):
        obj = {"type": "composed", "mechanism": obj, "count": 2}
    with pytest.raises(DeclarationError, match="nest"):
        parse_declaration(obj)


def test_declarations_are_immutable() -> None:
    decl = parse_declaration({"type": "pure_dp", "epsilon": 1})
    with pytest.raises(AttributeError):
        decl.epsilon = Decimal(2)  # type: ignore[attr-defined]
