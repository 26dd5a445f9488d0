"""The declarations of the partitioned datasets' property tests (the core's and the HTTP one)."""

from __future__ import annotations

from typing import Any

#: Declarations each admitted a few times on a fresh block of budget (2, 10⁻⁵), per leaf mode:
#: the histories of the partitioned datasets' property tests (core and HTTP).
BLOCK_MECHANISMS: dict[str, list[dict[str, Any]]] = {
    "basic": [
        {"type": "pure_dp", "epsilon": "0.3"},
        {"type": "approx_dp", "epsilon": "0.2", "delta": "0.0000001"},
        {
            "type": "odp",
            "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.4"}],
        },
    ],
    # each admitted a few times on a fresh block (ρ = 1/32 of 0.107; μ² = 1/16 of 0.249)
    "zcdp": [
        {"type": "gaussian", "sigma": "4", "sensitivity": "1"},
        {"type": "pure_dp", "epsilon": "0.3"},
    ],
    "rdp": [
        {"type": "gaussian", "sigma": "4", "sensitivity": "1"},
        {"type": "dp_sgd", "noise_multiplier": "1", "sample_rate": "0.05", "steps": 20},
    ],
    "gdp": [
        {"type": "gaussian", "sigma": "4", "sensitivity": "1"},
        {"type": "gaussian", "sigma": "6", "sensitivity": "1"},
    ],
}
