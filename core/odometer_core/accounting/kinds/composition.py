"""The kinds that run other mechanisms several times inside one invocation: a fixed
composition (``composed``) and private selection (``repeat_and_select``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, ClassVar, Literal

from odometer_core.accounting.exact import fmt
from odometer_core.accounting.kinds.base import (
    Declaration,
    DeclarationError,
    Nested,
    OdpCapable,
    entries,
    only,
)
from odometer_core.accounting.kinds.fields import form_of, read, spec


@dataclass(frozen=True, slots=True)
class Composed(Declaration):
    """Non-adaptive composition of a fixed list of mechanisms inside one invocation.

    Items are (declaration, count) pairs: ``{"mechanisms": [...]}`` gives count 1 each,
    ``{"mechanism": ..., "count": k}`` one item with count k. ODP kinds cannot be composed
    (their cell would be a product space; declare them as separate invocations).
    """

    kind: ClassVar[str] = "composed"
    items: tuple[tuple[Declaration, int], ...]

    def to_json(self) -> dict[str, Any]:
        if len(self.items) == 1 and self.items[0][1] != 1:
            decl, count = self.items[0]
            return {"type": self.kind, "mechanism": decl.to_json(), "count": count}
        out: list[dict[str, Any]] = []
        for decl, count in self.items:
            out.extend([decl.to_json()] * count)
        return {"type": self.kind, "mechanisms": out}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> Composed:
        table = spec(cls.kind)
        listed, repeated = table.forms  # mechanisms: [...], or mechanism and count
        if "mechanisms" in params:
            only(params, listed.fields, cls.kind)
            limit = table.field("mechanisms").entries
            assert limit is not None
            items = tuple((nested(r), 1) for r in entries(params, "mechanisms", limit))
        else:
            only(params, repeated.fields, cls.kind)
            inner = nested(params.get("mechanism"))
            items = ((inner, read(params, replace(table.field("count"), required=True))),)
        for decl, _ in items:
            if isinstance(decl, OdpCapable):
                raise DeclarationError(
                    "ODP partitions cannot be composed inside one invocation", field="mechanisms"
                )
        return cls(items)


@dataclass(frozen=True, slots=True)
class RepeatAndSelect(Declaration):
    """Private selection (hyperparameter tuning): the inner ``mechanism`` run K times, K random,
    and only the best of its K outputs released (Liu–Talwar 2019, "Private selection from
    private candidates", STOC; Papernot–Steinke 2022, "Hyperparameter tuning with Rényi
    differential privacy", ICLR), as dp_accounting's ``RepeatAndSelectDpEvent(event, mean,
    shape)``.

    K ~ Poisson(``mean``) (PS22 Thm 6; dp_accounting's shape ∞), or K ~ the truncated negative
    binomial D_{η,γ} on {1, 2, …} of ``shape`` η ≥ 0 whose mean is ``mean`` (PS22 Def. 1 and
    Thm 2; η = 0 is the logarithmic distribution, η = 1 the geometric). ``mean`` > 1: a
    distribution on {1, 2, …} with mean 1 is K = 1, the mechanism itself. The inner mechanism
    may not be an ODP partition (its cells describe one run's outputs). How each mode charges it
    (or refuses): :mod:`odometer_core.accounting.selection` and ``docs/accounting.md``."""

    kind: ClassVar[str] = "repeat_and_select"
    mechanism: Declaration
    mean: Decimal
    distribution: Literal["poisson", "truncated_negative_binomial"]
    shape: Decimal | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.kind,
            "distribution": self.distribution,
            "mean": fmt(self.mean),
        }
        if self.shape is not None:
            out["shape"] = fmt(self.shape)
        out["mechanism"] = self.mechanism.to_json()
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> RepeatAndSelect:
        table = spec(cls.kind)
        form = form_of(params, cls.kind)
        distribution = params["distribution"]
        shape = (
            read(params, replace(table.field("shape"), required=True))
            if "shape" in form.fields
            else None
        )
        mean = read(params, table.field("mean"))
        inner = nested(params.get("mechanism"))
        if isinstance(inner, OdpCapable):
            raise DeclarationError(
                "an ODP partition cannot be repeated and selected", field="mechanism"
            )
        return cls(inner, mean, distribution, shape)
