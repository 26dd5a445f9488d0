"""What every declaration kind is built on: the limits on sizes, the error a payload gets,
the field parsers, the :class:`Declaration` base class and the two mixins the modes dispatch
on (:class:`OdpCapable`, :class:`ChargedAs`).

The kinds themselves live beside this module by family; the closed registry that is the only
way to build one from a payload is :mod:`odometer_core.accounting.declarations`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, Final, Literal

from odometer_core.accounting.exact import AmountError, fmt, parse_amount

# ---------------------------------------------------------------------------- limits
#: "Absurd sizes" are rejected; these bounds keep every computation
#: finite and every payload small.
MAX_PRIVACY_PARAMETER: Final = Decimal(10) ** 6  # ε, ρ, ξ, μ, τ
MAX_MECHANISM_PARAMETER: Final = Decimal(10) ** 12  # σ, b, Δ
MAX_CELLS: Final = 1024
MAX_CURVE_POINTS: Final = 256
MAX_COMPOSED_ITEMS: Final = 256
MAX_COUNT: Final = 10**7
MAX_STEPS: Final = 10**7
MAX_DEPTH: Final = 4
MAX_POPULATION: Final = 10**12
MAX_ORDER: Final = Decimal(10) ** 6
MAX_TREES: Final = 1024  # trees of one tree_aggregation
MAX_RUNS_MEAN: Final = Decimal(10) ** 6  # E[K] of repeat_and_select
MAX_MIXTURE_COMPONENTS: Final = 256  # components of one mixture_of_gaussians
MAX_SAMPLE_SIZE: Final = 10**6  # draws of one sampled_with_replacement
#: An ODP cell's name: the one pattern the core, the request models and the document use.
CELL_NAME_PATTERN: Final = r"^[A-Za-z0-9_.:=+\-]{1,64}$"
CELL_NAME: Final = re.compile(CELL_NAME_PATTERN)
#: The same rule as an answer writes it: ``[A-Za-z0-9_.:=+-]{1,64}``.
CELL_NAME_RULE: Final = CELL_NAME_PATTERN.strip("^$").replace("\\-", "-")

Relation = Literal["add_remove", "replace_one"]
RELATIONS: Final[tuple[str, ...]] = ("add_remove", "replace_one")


class DeclarationError(ValueError):
    """A declaration is malformed, out of range, or not valid for the dataset (→ HTTP 422)."""

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


# ---------------------------------------------------------------------------- field parsing
def amount(
    params: Mapping[str, Any],
    name: str,
    *,
    default: Decimal | None = None,
    upper: Decimal = MAX_PRIVACY_PARAMETER,
    positive: bool = False,
    below_one: bool = False,
) -> Decimal:
    if name not in params:
        if default is None:
            raise DeclarationError(f"missing field '{name}'", field=name)
        return default
    try:
        d = parse_amount(params[name], name)
    except AmountError as exc:
        raise DeclarationError(str(exc), field=name) from None
    if d < 0:
        raise DeclarationError(f"{name} must be ≥ 0, got {fmt(d)}", field=name)
    if positive and d == 0:
        raise DeclarationError(f"{name} must be > 0", field=name)
    if below_one and d >= 1:
        raise DeclarationError(f"{name} must be < 1, got {fmt(d)}", field=name)
    if d > upper:
        raise DeclarationError(f"{name} must be ≤ {fmt(upper)}, got {fmt(d)}", field=name)
    return d


def integer(params: Mapping[str, Any], name: str, *, lower: int, upper: int) -> int:
    if name not in params:
        raise DeclarationError(f"missing field '{name}'", field=name)
    v = params[name]
    if isinstance(v, bool):
        raise DeclarationError(f"{name} must be an integer", field=name)
    if isinstance(v, str) and re.fullmatch(r"[0-9]{1,15}", v.strip()):
        v = int(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        v = int(v)
    if not isinstance(v, int):
        raise DeclarationError(f"{name} must be an integer", field=name)
    if not lower <= v <= upper:
        raise DeclarationError(f"{name} must be in [{lower}, {upper}], got {v}", field=name)
    return v


def only(params: Mapping[str, Any], allowed: Sequence[str], kind: str) -> None:
    unknown = sorted(set(params) - set(allowed) - {"type"})
    if unknown:
        raise DeclarationError(f"unknown field(s) for '{kind}': {', '.join(unknown)}")


def entries(params: Mapping[str, Any], name: str, limit: int) -> list[Any]:
    v = params.get(name)
    if not isinstance(v, list):
        raise DeclarationError(f"{name} must be a list", field=name)
    if not v:
        raise DeclarationError(f"{name} must not be empty", field=name)
    if len(v) > limit:
        raise DeclarationError(f"{name} has more than {limit} entries", field=name)
    return v


# ---------------------------------------------------------------------------- base classes
@dataclass(frozen=True, slots=True)
class Declaration:
    """Base of every kind. Subclasses set :attr:`kind` and implement the codec."""

    kind: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], nested: Nested
    ) -> Declaration:  # pragma: no cover
        """Validate ``params`` (the payload, ``"type"`` included) and build the kind; a
        mechanism nested in it is parsed by ``nested``."""
        raise NotImplementedError


#: Parses a mechanism nested in a declaration's payload, one level down: the registry's parser,
#: depth-checked (:func:`odometer_core.accounting.declarations.parse_declaration`), handed to
#: :meth:`Declaration.from_params` so that no kind needs to know the registry.
Nested = Callable[[object], Declaration]


@dataclass(frozen=True, slots=True)
class OdpPartition:
    """An ODP partition (Hartmann et al. 2022, Definition 2): named cells, each with ε_k, one δ.

    The mechanism is then (max_k ε_k, δ)-DP (Lemma 4), and in a basic-composition filter the
    realised cell's ε_k is the charge (Hartmann et al. 2022, Theorem 7 and Algorithm 1 line 14).
    """

    cells: tuple[tuple[str, Decimal], ...]
    delta: Decimal

    @property
    def worst_epsilon(self) -> Decimal:
        """sup_k ε_k: the (ε, δ)-DP guarantee of the whole mechanism (Lemma 4)."""
        return max(e for _, e in self.cells)

    def epsilon_of(self, cell: str) -> Decimal | None:
        """ε of the named cell, or ``None`` when the cell was not declared."""
        for name, eps in self.cells:
            if name == cell:
                return eps
        return None


class OdpCapable:
    """Mixin for kinds with an output-dependent partition."""

    def partition(self) -> OdpPartition:  # pragma: no cover - abstract
        raise NotImplementedError


class ChargedAs:
    """Mixin for mechanisms whose guarantee is exactly what another kind declares.

    :meth:`charged_as` is that kind, built from the mechanism's parameters by the theorem cited
    on the class; the modes charge it in the mechanism's place (``gdp`` refuses with its own
    reason). The declaration keeps its own kind in the ledger: what ran, not what it cost.
    """

    def charged_as(self) -> Declaration:  # pragma: no cover - abstract
        raise NotImplementedError
