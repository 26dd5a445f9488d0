"""The workload a curator declares when creating an ``rdp`` dataset: its declarations and
counts (validated: each one chargeable in ``rdp`` mode under the dataset's relation), their summed
curve, and the record of the grid chosen for it, kept in the configuration.

The choice of the grid itself is :func:`odometer_core.accounting.modes.rdp.choose_grid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import effort
from odometer_core.accounting.declarations import (
    Declaration,
    DeclarationError,
    Relation,
    parse_declaration,
)
from odometer_core.accounting.exact import ZERO, add_up, fmt, mul_up
from odometer_core.accounting.modes.common import ConfigError, check_relation, float_text
from odometer_core.accounting.modes.curves import rdp_curve, unsupported

FloatArray = npt.NDArray[np.float64]

#: At most this many declarations describe a workload, each expected at most this many times.
MAX_WORKLOAD_ITEMS: Final = 8
MAX_WORKLOAD_COUNT: Final = 10**6

#: The share of δ_c the order chosen for a workload gets; the rest is split equally over the
#: other orders of the default grid (:data:`~odometer_core.accounting.modes.rdp.
#: DEFAULT_RDP_ORDERS`), so that other mechanisms still fit.
WORKLOAD_SHARE: Final = Decimal("0.9")


@dataclass(frozen=True, slots=True)
class WorkloadChoice:
    """The workload a dataset's grid was chosen for, the chosen order, and how many of each
    declaration the filter is expected to admit (the largest multiple t of the whole workload
    whose curve and δ fit, times each count, capped at the count)."""

    items: tuple[tuple[Declaration, int], ...]
    order: float
    expected: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "mechanisms": [
                {"mechanism": decl.to_json(), "count": n, "expected_admitted": e}
                for (decl, n), e in zip(self.items, self.expected, strict=True)
            ],
            "order": float_text(self.order),
            "share": fmt(WORKLOAD_SHARE),
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> WorkloadChoice:
        rows = obj["mechanisms"]
        return WorkloadChoice(
            tuple((parse_declaration(r["mechanism"]), int(r["count"])) for r in rows),
            float(obj["order"]),
            tuple(int(r["expected_admitted"]) for r in rows),
        )


def parse_workload(raw: object, rel: Relation) -> tuple[tuple[Declaration, int], ...]:
    """``[{"mechanism": <declaration JSON of the register endpoint>, "count": n}, …]``:
    1–:data:`MAX_WORKLOAD_ITEMS` items, counts 1–:data:`MAX_WORKLOAD_COUNT`, each declaration
    valid, chargeable in ``rdp`` mode and under the dataset's relation (:class:`ConfigError`
    naming the item otherwise)."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_WORKLOAD_ITEMS:
        raise ConfigError(f"workload must be a list of 1–{MAX_WORKLOAD_ITEMS} items")
    out: list[tuple[Declaration, int]] = []
    for i, item in enumerate(raw):
        where = f"workload[{i}]"
        if not isinstance(item, Mapping) or set(item) != {"mechanism", "count"}:
            raise ConfigError(f"{where} must be an object with 'mechanism' and 'count'")
        count = item["count"]
        if (
            not isinstance(count, int)
            or isinstance(count, bool)
            or not 1 <= count <= MAX_WORKLOAD_COUNT
        ):
            raise ConfigError(f"{where}.count must be an integer from 1 to {MAX_WORKLOAD_COUNT}")
        try:
            decl = parse_declaration(item["mechanism"])
            check_relation(decl, rel)
        except DeclarationError as exc:
            raise ConfigError(f"{where}.mechanism: {exc}") from None
        why = unsupported(decl)
        if why is not None:
            raise ConfigError(f"{where}.mechanism: {why}")
        out.append((decl, count))
    return tuple(out)


def workload_curve(
    items: tuple[tuple[Declaration, int], ...], rel: Relation, orders: FloatArray, tight: bool
) -> tuple[FloatArray, Decimal]:
    """Σ n_k ε_k(α) and Σ n_k δ_k of a workload, within one charge's work limit
    (:mod:`odometer_core.accounting.effort`; a :class:`ConfigError` past it)."""
    total = np.zeros_like(orders)
    delta = ZERO
    try:
        with effort.limited():
            for decl, n in items:
                c, d = rdp_curve(decl, rel, orders, tight=tight)
                with np.errstate(over="ignore"):
                    total = total + float(n) * c
                delta = add_up(delta, mul_up(Decimal(n), d))
    except DeclarationError as exc:
        raise ConfigError(f"workload: {exc}") from None
    return total, delta
