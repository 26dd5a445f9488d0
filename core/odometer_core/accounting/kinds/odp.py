"""The output-dependent (ODP) kinds: ``odp`` and the templates ``svt``, ``ptr``, ``iterative``
and ``tested_release``, each exposing its partition (:meth:`~odometer_core.accounting.kinds.
base.OdpCapable.partition`): the named cells with their ε and the single δ of the partition
(Hartmann et al. 2022, Definition 2)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise
from typing import Any, ClassVar

from odometer_core.accounting.exact import UP, ZERO, add_up, fmt, mul_up
from odometer_core.accounting.kinds.base import (
    CELL_NAME,
    CELL_NAME_RULE,
    Declaration,
    DeclarationError,
    Nested,
    OdpCapable,
    OdpPartition,
    entries,
    only,
)
from odometer_core.accounting.kinds.fields import read, read_kind, spec


@dataclass(frozen=True, slots=True)
class ODP(Declaration, OdpCapable):
    """An explicit ODP partition: named cells with ε_k and one δ (Hartmann et al. 2022,
    Definition 2)."""

    kind: ClassVar[str] = "odp"
    cells: tuple[tuple[str, Decimal], ...]
    delta: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "cells": [{"name": n, "epsilon": fmt(e)} for n, e in self.cells],
            "delta": fmt(self.delta),
        }

    def partition(self) -> OdpPartition:
        return OdpPartition(self.cells, self.delta)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> ODP:
        table = spec(cls.kind)
        only(params, [f.name for f in table.fields], cls.kind)
        field = table.field("cells")
        cell, limit = field.cell, field.entries
        assert cell is not None and limit is not None
        raw = entries(params, "cells", limit)
        names = [f.name for f in cell.fields]
        checked = [f for f in cell.fields if f.shape != "text"]  # the name: checked below
        cells: list[tuple[str, Decimal]] = []
        seen: set[str] = set()
        for item in raw:
            if not isinstance(item, Mapping):
                raise DeclarationError(
                    f"each cell must be an object {{{', '.join(names)}}}", field="cells"
                )
            only(item, names, cell.kind)
            name = item.get("name")
            if not isinstance(name, str) or not CELL_NAME.match(name):
                raise DeclarationError(f"cell names must match {CELL_NAME_RULE}", field="cells")
            if name in seen:
                raise DeclarationError(f"duplicate cell name '{name}'", field="cells")
            seen.add(name)
            read_cell = {f.name: read(item, f) for f in checked}
            cells.append((name, read_cell["epsilon"]))
        return cls(tuple(cells), read(params, table.field("delta")))


@dataclass(frozen=True, slots=True)
class SVT(Declaration, OdpCapable):
    """Sparse vector technique with at most c ⊤ answers (Hartmann et al. 2022, Algorithm 2).

    Lemma 8: the cell of outputs with exactly c' ⊤ answers has ε(c') = ε₁ + (c'/c)·ε₂, and the
    mechanism is ODP with δ = 0. Cells are named ``tops=c'`` for c' = 0..c.
    """

    kind: ClassVar[str] = "svt"
    epsilon1: Decimal
    epsilon2: Decimal
    c: int

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "epsilon1": fmt(self.epsilon1),
            "epsilon2": fmt(self.epsilon2),
            "c": self.c,
        }

    def partition(self) -> OdpPartition:
        cells = tuple(
            (
                f"tops={k}",
                add_up(
                    self.epsilon1, UP.divide(mul_up(Decimal(k), self.epsilon2), Decimal(self.c))
                ),
            )
            for k in range(self.c + 1)
        )
        return OdpPartition(cells, ZERO)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> SVT:
        return cls(**read_kind(params, cls.kind))


@dataclass(frozen=True, slots=True)
class PTR(Declaration, OdpCapable):
    """Propose-test-release (Hartmann et al. 2022, Definition 9 and Lemma 10).

    ``tests = 1``: one (ε, δ)-PTR function — released value cell 2ε, ⊥ cell ε (Def. 9 with
    the ε-DP release). ``tests = 2``: the IQR construction of Lemma 10 — value 3ε, ⊥ 2ε. δ is
    the PTR function's δ and is charged in full.
    """

    kind: ClassVar[str] = "ptr"
    epsilon: Decimal
    delta: Decimal
    tests: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "epsilon": fmt(self.epsilon),
            "delta": fmt(self.delta),
            "tests": self.tests,
        }

    def partition(self) -> OdpPartition:
        t = Decimal(self.tests)
        return OdpPartition(
            (("value", mul_up(t + 1, self.epsilon)), ("bottom", mul_up(t, self.epsilon))),
            self.delta,
        )

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> PTR:
        return cls(**read_kind(params, cls.kind))


@dataclass(frozen=True, slots=True)
class Iterative(Declaration, OdpCapable):
    """Iterative mechanism with data-dependent early stopping (Hartmann et al. 2022,
    Algorithm 3, Lemma 11).

    Each step is (ε_step, δ_step)-DP; the run may stop at the declared points k_1 < … < k_n.
    With COMP = basic composition, stopping point k has ε^k = k·ε_step and δ^k = k·δ_step, and
    Lemma 11 makes the whole mechanism ODP with cells ``stop=k`` (ε^k) and
    δ = Σ_i δ^{k_i} — summed over **all** potential stopping points, reserved in full.
    """

    kind: ClassVar[str] = "iterative"
    step_epsilon: Decimal
    step_delta: Decimal
    stopping_points: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "step_epsilon": fmt(self.step_epsilon),
            "step_delta": fmt(self.step_delta),
            "stopping_points": list(self.stopping_points),
        }

    def partition(self) -> OdpPartition:
        cells = tuple(
            (f"stop={k}", mul_up(Decimal(k), self.step_epsilon)) for k in self.stopping_points
        )
        delta = add_up(*(mul_up(Decimal(k), self.step_delta) for k in self.stopping_points))
        return OdpPartition(cells, delta)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> Iterative:
        table = spec(cls.kind)
        only(params, [f.name for f in table.fields], cls.kind)
        points: tuple[int, ...] = read(params, table.field("stopping_points"))
        for prev, nxt in pairwise(points):
            if nxt <= prev:
                raise DeclarationError(
                    "stopping_points must be strictly increasing", field="stopping_points"
                )
        part = cls(
            read(params, table.field("step_epsilon")),
            read(params, table.field("step_delta")),
            points,
        )
        if part.partition().delta >= 1:
            raise DeclarationError("the summed δ over all stopping points must be < 1")
        return part


@dataclass(frozen=True, slots=True)
class TestedRelease(Declaration, OdpCapable):
    """Output perturbation with a DP quality test (Hartmann et al. 2022, Algorithm 5, Corollary 18).

    Cells ``released`` (ε₁) and ``bottom`` (ε₂, the ⊥ answer), valid when ε₁ ≥ ε₂; one δ.
    """

    kind: ClassVar[str] = "tested_release"
    epsilon_release: Decimal
    epsilon_bottom: Decimal
    delta: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "epsilon_release": fmt(self.epsilon_release),
            "epsilon_bottom": fmt(self.epsilon_bottom),
            "delta": fmt(self.delta),
        }

    def partition(self) -> OdpPartition:
        return OdpPartition(
            (("released", self.epsilon_release), ("bottom", self.epsilon_bottom)), self.delta
        )

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> TestedRelease:
        decl = cls(**read_kind(params, cls.kind))
        if decl.epsilon_bottom > decl.epsilon_release:
            raise DeclarationError("Corollary 18 needs epsilon_release ≥ epsilon_bottom")
        return decl
