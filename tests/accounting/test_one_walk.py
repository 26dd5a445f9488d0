"""Each mode answers "can it account this?" and "what does it charge?" with one walk over the
declaration (``_walk`` of each mode, as dp_accounting's ``_maybe_compose``): a declaration is
supported exactly when its charge is computed, and a refused one's charge raises the very reason
``unsupported`` gives. Checked for every kind, nested and refused ones included, in every leaf
mode; and the core's modules stay at most :data:`MAX_LINES` long."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import odometer_core
from odometer_core.accounting import parse_declaration
from odometer_core.accounting.declarations import Declaration
from odometer_core.accounting.modes import LEAF_MODES, basic, gdp, rdp, zcdp
from odometer_core.accounting.modes.common import UnsupportedInMode
from tests.accounting.test_declarations import EXAMPLES

GAUSSIAN = {"type": "gaussian", "sigma": "2", "sensitivity": "1"}
APPROX = {"type": "approx_dp", "epsilon": "1", "delta": "1E-6"}
LAPLACE = {"type": "laplace", "scale": "1", "sensitivity": "1"}


def _poisson(mechanism: dict[str, Any]) -> dict[str, Any]:
    return {"type": "subsampled", "scheme": "poisson", "rate": "0.1", "mechanism": mechanism}


def _selected(mechanism: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "repeat_and_select",
        "distribution": "poisson",
        "mean": "3",
        "mechanism": mechanism,
    }


#: Nestings where a mode's refusal hides below the top (and ones where it does not).
NESTED: list[dict[str, Any]] = [
    {"type": "composed", "mechanisms": [GAUSSIAN, {"type": "gdp", "mu": "0.3"}]},
    {"type": "composed", "mechanisms": [GAUSSIAN, LAPLACE]},
    {"type": "composed", "mechanisms": [{"type": "composed", "mechanism": GAUSSIAN, "count": 3}]},
    {"type": "composed", "mechanisms": [_poisson(LAPLACE), GAUSSIAN]},
    _poisson(LAPLACE),
    _poisson(APPROX),
    _selected(APPROX),
    _selected({"type": "zcdp", "rho": "0.1", "xi": "0", "delta": "1E-6"}),
    _selected(_poisson(LAPLACE)),
    _selected({"type": "composed", "mechanisms": [GAUSSIAN, APPROX]}),
    _selected(_selected(GAUSSIAN)),
    {"type": "composed", "mechanisms": [_selected(APPROX), GAUSSIAN]},
    _poisson(_selected(APPROX)),
]

DECLARATIONS = [parse_declaration(d) for d in EXAMPLES + NESTED]
ORDERS = np.asarray(rdp.DEFAULT_RDP_ORDERS, dtype=np.float64)

#: The charge each leaf mode computes for one declaration.
CHARGES: dict[str, Callable[[Declaration], object]] = {
    "basic": lambda decl: basic.eps_delta(decl, Decimal("1E-6")),
    "zcdp": zcdp.zcdp_charge,
    "rdp": lambda decl: rdp.rdp_curve(decl, "add_remove", ORDERS),
    "gdp": gdp.gdp_charge,
}

#: How many of :data:`DECLARATIONS` each mode refuses (a refusal lost or gained shows here).
REFUSED = {"basic": 6, "zcdp": 19, "rdp": 10, "gdp": 38}


@pytest.mark.parametrize("mode", sorted(CHARGES))
def test_a_declaration_is_supported_exactly_when_it_is_charged(mode: str) -> None:
    refused = 0
    for decl in DECLARATIONS:
        why = LEAF_MODES[mode].unsupported(decl)
        if why is None:
            assert CHARGES[mode](decl) is not None, decl
            continue
        refused += 1
        with pytest.raises(UnsupportedInMode) as raised:
            CHARGES[mode](decl)
        assert raised.value.detail == why, decl
    assert refused == REFUSED[mode]


def test_the_refusals_name_the_nested_mechanism() -> None:
    decl = parse_declaration(_selected(APPROX))
    approximate_inner = (
        "'repeat_and_select' needs the inner mechanism's Rényi DP (Papernot–Steinke 2022, "
        "Thms 2 and 6); an (ε, δ) guarantee with δ > 0 gives none, and no theorem bounds the "
        "selection from it: declare the inner mechanism by its RDP curve ('rdp'), its ρ "
        "('zcdp' with δ = 0) or its noise (e.g. 'gaussian')"
    )
    assert rdp.unsupported(decl) == basic.unsupported(decl) == approximate_inner
    assert zcdp.unsupported(parse_declaration(_poisson(LAPLACE))) == (
        "'subsampled' has no certified zCDP bound (a finite RDP grid does not certify zCDP and "
        "subsampling does not improve ρ); use a dataset or sub-budget in mode 'rdp'"
    )
    assert rdp.unsupported(parse_declaration(_poisson(LAPLACE))) == (
        "RDP amplification by subsampling is implemented for the Gaussian mechanism only "
        "(Mironov–Talwar–Zhang 2019; Wang–Balle–Kasiviswanathan 2019 Thm 27); declare the "
        "subsampled mechanism's own RDP curve with type 'rdp' instead"
    )
    assert gdp.unsupported(parse_declaration(NESTED[0])) is None
    assert gdp.unsupported(parse_declaration(NESTED[1])) == (
        "mode 'gdp' accepts only certified μ-GDP declarations ('gdp', 'gaussian', "
        "'tree_aggregation'), not 'laplace'; use mode 'zcdp' or 'rdp'"
    )


#: No module of the core is longer than this (split it by what it is about instead).
MAX_LINES = 900


def test_no_core_module_is_longer_than_the_limit() -> None:
    root = Path(odometer_core.__file__).parent
    lengths = {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in root.rglob("*.py")
    }
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}
