"""``supports()`` is the one rule behind the 422 path: it says exactly which declaration kinds
each mode can account, and ``admit`` refuses precisely those it says no to."""

from __future__ import annotations

from typing import Any

import pytest

from odometer_core.accounting import (
    UnsupportedInMode,
    admit,
    initial_state,
    make_config,
    parse_declaration,
    supports,
)
from tests.accounting.test_declarations import EXAMPLES

MODES = ("basic", "zcdp", "rdp", "gdp")


def _name(example: dict[str, Any]) -> str:
    if example["type"] == "report_noisy_max":
        return f"report_noisy_max/{example['noise']}"
    if example["type"] == "subsampled":
        return f"subsampled/{example['mechanism']['type']}"
    if example["type"] == "repeat_and_select":
        return f"repeat_and_select/{example['distribution']}"
    if example["type"] == "composed":
        return "composed/" + "+".join(m["type"] for m in example.get("mechanisms", []) or [])
    return str(example["type"])


#: What each mode accepts among the examples (everything else is refused with a 422).
SUPPORTED: dict[str, set[str]] = {
    "basic": {_name(e) for e in EXAMPLES},
    "zcdp": {
        "pure_dp", "approx_dp", "zcdp", "gdp", "mcdp", "odp", "gaussian", "laplace",
        "randomized_response", "exponential", "composed/", "composed/pure_dp+gaussian", "svt",
        "ptr", "iterative", "tested_release", "discrete_laplace", "discrete_gaussian",
        "report_noisy_max/gumbel", "report_noisy_max/exponential", "tree_aggregation",
    },
    "rdp": {_name(e) for e in EXAMPLES} - {"subsampled/pure_dp"},
    "gdp": {"gdp", "gaussian", "tree_aggregation"},
}  # fmt: skip


def _config(mode: str) -> Any:
    relation = "add_remove"
    return make_config(10, "1e-5", relation, {"mode": mode})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("example", EXAMPLES, ids=_name)
def test_supports_says_exactly_what_admit_accepts(mode: str, example: dict[str, Any]) -> None:
    config = _config(mode)
    decl = parse_declaration(example)
    wor = decl.kind == "subsampled" and decl.to_json()["scheme"] == "without_replacement"
    if wor or decl.kind == "sampled_with_replacement":  # analysed under replace-one
        config = make_config(10, "1e-5", "replace_one", {"mode": mode})
    expected = _name(example) in SUPPORTED[mode]
    assert supports(config, decl) is expected
    if expected:
        admit(config, initial_state(config), decl)
    else:
        with pytest.raises(UnsupportedInMode):
            admit(config, initial_state(config), decl)


def test_a_split_dataset_answers_for_the_named_sub_budget() -> None:
    half = {"epsilon": 1, "delta": "5e-7"}
    sub_budgets = [
        {"name": "a", "budget": half},
        {"name": "g", "budget": half, "accounting": {"mode": "gdp"}},
    ]
    config = make_config(2, "1e-6", "add_remove", {"mode": "split", "sub_budgets": sub_budgets})
    laplace = parse_declaration({"type": "laplace", "scale": "2", "sensitivity": "1"})
    assert supports(config, laplace, sub_budget="a") is True
    assert supports(config, laplace, sub_budget="g") is False
    with pytest.raises(UnsupportedInMode, match="mode 'gdp' accepts only certified"):
        admit(config, initial_state(config), laplace, sub_budget="g")
