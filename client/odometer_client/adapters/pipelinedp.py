"""PipelineDP budget accountants that draw the pipeline's budget from the odometer.

PipelineDP keeps a budget for one pipeline and forgets it afterwards. Its
``BudgetAccountant.compute_budgets()`` runs on the driver once the graph is built and before any
backend computes anything (LocalBackend, Beam, Spark alike): that is where the whole spend is
known and no noise has been drawn yet. :class:`NaiveBudgetAccountant` and
:class:`PLDBudgetAccountant` are PipelineDP's accountants of the same names whose
``compute_budgets()`` then registers the pipeline with the odometer, as **one invocation**:

- **declared from its mechanisms and their noise**, not a trusted total, as one ``composed``
  list (a mechanism applied ``count`` times is ``composed(item, count=count)``):

  ==========================================  ==============================================
  ``PLDBudgetAccountant``: ``GAUSSIAN``       ``gaussian`` σ = the noise std PipelineDP set per
                                              unit of sensitivity (its noise is std × ℓ₂)
  ``PLDBudgetAccountant``: ``LAPLACE``        ``laplace`` scale std/√2 (its noise is a
                                              Laplace of that std × ℓ₁)
  ``GENERIC``, ``TRUNCATED_GEOMETRIC``        ``approx_dp`` (ε₀, δ₀) as PipelineDP set them
  ``*_THRESHOLDING`` (PLD)                    refused before anything is sent: their extra
                                              δ is not a composition item (use the naive
                                              accountant or the default selection)
  ``NaiveBudgetAccountant``: every mechanism  ``approx_dp`` (ε_i, δ_i), ``pure_dp`` ε_i
                                              where δ_i = 0 (Laplace)
  ==========================================  ==============================================

  Noise scales are read **down** with a relative margin of 2⁻⁴⁰ (PipelineDP multiplies them
  by the sensitivities in binary floats, a few ulps of error), privacy parameters **up**
  (17 digits). The Gaussians' ``conversion_delta`` is the target δ less the items' own δ, so
  the charge's δ is the target's; a ``basic`` dataset (accounting 1.5.0 on) charges the list
  the ε of the joint privacy-loss distribution of its items at that δ.
- **charged once**: the registration's idempotency key is derived from the dataset, the
  ``run`` label the analyst gives and the pipeline (its mechanisms' types, names, weights,
  sensitivities and counts, and the declaration), so a retried or restarted driver that
  builds the same pipeline under the same label gets the stored decision back, not a second
  charge. A new label is a new release, charged again. A driver restarted after it released
  part of its output releases that part again with fresh noise: give a new label then.
- **fail closed**: every mechanism's budget (noise std, ε, δ, thresholding δ) is taken away
  before the request is sent and given back only when the odometer admitted the pipeline; a
  refusal (:class:`PipelineRefused`, with the 409's summary and what would fit ``instead``), a
  declaration that cannot be made or a transport error leaves every mechanism without a
  budget, and consuming the pipeline's result fails before any noise is drawn.

**Headroom.** The odometer charges the list its own sound PLD (pessimistic, read at
δ·(1 − 10⁻⁶), ε rounded up); PipelineDP 0.3's PLD accountant composes the default partition
selection as a copy of the mechanism before it, and Laplace noise at the pipeline's δ where
the odometer charges a Laplace-only list at δ = 0; the naive accountant's float shares can sum
to a hair above the target. So the accountants calibrate PipelineDP to
(ε·(1 − ``headroom``), δ·(1 − ``headroom``)) (default :data:`HEADROOM`, 10⁻⁶) and declare the
Gaussians' conversion δ against the full target δ; the PLD accountant then previews the
declaration (nothing is written) and, where the odometer would charge more than the target,
multiplies every noise std by the least factor s ≥ 1 (to 10⁻⁴) at which it does not
(``noise_factor``; ``fit=False`` keeps PipelineDP's noise). ``charged_epsilon`` and
``charged_delta`` say what was charged.

PipelineDP is imported when an accountant class is first used (``pip install
'privacy-odometer-client[pipelinedp]'``, pipeline-dp 0.3, dp-accounting for the PLD
accountant); :func:`declaration` and :func:`idempotency_key` need no PipelineDP.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from odometer_client.adapters._refused import AdapterRefused
from odometer_client.declarations import (
    DOWN,
    UP,
    Mechanism,
    approx_dp,
    composed,
    gaussian,
    laplace,
    pure_dp,
)
from odometer_client.errors import BudgetExceeded

#: The relative margin the accountants leave between what PipelineDP is calibrated to and the
#: target they are given (see the module).
HEADROOM: Final = 1e-6

#: Noise scales are read down by this relative margin (float products of a few ulps).
_SCALE_MARGIN: Final = Decimal(1) - Decimal(2) ** -40

#: √2 rounded up: a Laplace scale std/√2 read with it is never above the true one.
_SQRT2_UP: Final = UP.sqrt(Decimal(2))

#: The fields of PipelineDP's ``MechanismSpec`` that hold a mechanism's budget (0.3).
_BUDGET_FIELDS: Final = ("_noise_standard_deviation", "_eps", "_delta", "_thresholding_delta")

_PLD_NOISE: Final = frozenset({"GAUSSIAN", "LAPLACE"})
_PAIRS: Final = frozenset({"GENERIC", "TRUNCATED_GEOMETRIC"})
_THRESHOLDING: Final = frozenset({"GAUSSIAN_THRESHOLDING", "LAPLACE_THRESHOLDING"})


class PipelineRefused(AdapterRefused):
    """The odometer refused the pipeline (409): no mechanism has a budget, nothing ran
    (``declared``: the pipeline's declaration)."""

    def __init__(self, refusal: BudgetExceeded, declared: Mechanism) -> None:
        super().__init__(refusal, declared, what="the pipeline", so="no noise was drawn")


@dataclass(frozen=True)
class Declared:
    """A pipeline's declaration: the ``composed`` list and the Gaussians' conversion δ
    (``None`` where the list has no Gaussian)."""

    mechanism: Mechanism
    conversion_delta: Decimal | None


def _float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"PipelineDP's {what} is not a number: {value!r}")
    f = float(value)
    if not math.isfinite(f) or f < 0:
        raise ValueError(f"PipelineDP's {what} is {f!r}: no finite guarantee to declare")
    return f


def _up(value: Any, what: str) -> Decimal:
    return UP.create_decimal_from_float(_float(value, what)).normalize(UP)


def _scale_down(value: Decimal) -> Decimal:
    return DOWN.multiply(value, _SCALE_MARGIN).normalize(DOWN)


def _type_name(spec: Any) -> str:
    return str(getattr(spec.mechanism_type, "name", spec.mechanism_type))


def _item(spec: Any, pld: bool) -> tuple[Mechanism, Decimal]:
    """One mechanism's declaration and its own δ (PLD: the noise PipelineDP set; naive: the
    (ε, δ) it set)."""
    kind = _type_name(spec)
    name = f"{kind} mechanism {spec.name!r}" if spec.name else f"{kind} mechanism"
    if pld and kind in _THRESHOLDING:
        raise ValueError(
            f"cannot declare the {name} of a PLD-calibrated pipeline: thresholding adds a δ "
            "that is not an item of the composition. Use NaiveBudgetAccountant, or the "
            "default partition selection (TRUNCATED_GEOMETRIC)"
        )
    if pld and kind in _PLD_NOISE:
        std = _float(spec._noise_standard_deviation, f"noise std of the {name}")
        if std == 0:
            raise ValueError(f"the {name} has no noise: not private")
        exact_std = Decimal(std)
        if kind == "GAUSSIAN":
            return gaussian(_scale_down(exact_std), 1), Decimal(0)
        scale = DOWN.divide(exact_std, _SQRT2_UP)
        return laplace(_scale_down(scale), 1), Decimal(0)
    if pld and kind not in _PAIRS:
        raise ValueError(f"cannot declare the {name}: unknown to this adapter")
    epsilon = _up(spec._eps, f"ε of the {name}")
    delta = _up(spec._delta or 0.0, f"δ of the {name}")
    if delta == 0:
        return pure_dp(epsilon), delta
    return approx_dp(epsilon, delta), delta


def declaration(specs: Sequence[Any], *, pld: bool, total_delta: Decimal) -> Declared:
    """The ``composed`` declaration of PipelineDP mechanism specs whose budgets
    ``compute_budgets()`` set (``pld``: the PLD accountant's noise std, else the naive
    accountant's (ε, δ)); the Gaussians' conversion δ is ``total_delta`` less the items' own
    δ (each times its count). Raises ``ValueError`` for a mechanism that cannot be declared or
    own δ that leave none for the Gaussians."""
    if not specs:
        raise ValueError("the pipeline requested no budget: nothing to declare")
    items: list[Mechanism] = []
    own_delta = Decimal(0)
    gaussians = False
    for spec in specs:
        count = spec.count
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"PipelineDP's count must be a positive integer, got {count!r}")
        item, delta = _item(spec, pld)
        gaussians = gaussians or item.type == "gaussian"
        own_delta += delta * count
        items.append(item if count == 1 else composed(item, count=count))
    conversion = None
    if gaussians:
        conversion = total_delta - own_delta
        if conversion <= 0:
            raise ValueError(
                f"the mechanisms' own δ ({own_delta}) leave no δ of {total_delta} for the Gaussians"
            )
    return Declared(composed(*items), conversion)


def idempotency_key(
    dataset_id: str, run: str, mechanisms: Sequence[Any], declared: Declared
) -> str:
    """The registration's key: a digest of the dataset, the ``run`` label, the pipeline's
    ``mechanisms`` (PipelineDP's internal specs: type, name, weight, sensitivity, count) and
    its declaration, so the same pipeline under the same label is charged once, and anything
    else is a new charge."""
    described = [
        (
            _type_name(m.mechanism_spec),
            m.mechanism_spec.name,
            repr(m.weight),
            repr(m.sensitivity),
            m.mechanism_spec.count,
        )
        for m in mechanisms
    ]
    document = {
        "dataset": dataset_id,
        "run": run,
        "mechanisms": described,
        "declaration": declared.mechanism.to_json(),
        "conversion_delta": None
        if declared.conversion_delta is None
        else str(declared.conversion_delta),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return "pipelinedp-" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- the accountants
class _Odometer:
    """What both accountants add to PipelineDP's: the target, the registration, the result."""

    def _odometer_init(
        self,
        client: Any,
        dataset: Any,
        epsilon: Any,
        delta: Any,
        run: str,
        headroom: float,
        fit: bool,
    ) -> tuple[float, float]:
        if not isinstance(run, str) or not run:
            raise ValueError("name the run: run='…' labels this release (see the module)")
        if not 0 <= headroom < 1:
            raise ValueError(f"headroom must be in [0, 1), got {headroom!r}")
        self.client = client
        self.dataset_id: str = dataset if isinstance(dataset, str) else str(dataset.id)
        self.run = run
        self.target_epsilon = Decimal(repr(epsilon) if isinstance(epsilon, float) else str(epsilon))
        self.target_delta = Decimal(repr(delta) if isinstance(delta, float) else str(delta))
        self.headroom = headroom
        self.fit = fit
        #: the factor the PLD accountant's noise was multiplied by to fit the target (1: none)
        self.noise_factor = 1.0
        #: set by compute_budgets(): the admitted invocation, the declaration and what was charged
        self.invocation: Any = None
        self.declared: Declared | None = None
        self.charged_epsilon: Decimal | None = None
        self.charged_delta: Decimal | None = None
        return (
            float(self.target_epsilon) * (1 - headroom),
            float(self.target_delta) * (1 - headroom),
        )

    def _register(self, pld: bool) -> None:
        mechanisms: list[Any] = list(self._mechanisms)  # type: ignore[attr-defined]
        if not mechanisms:
            return  # PipelineDP warned: no budget requested, nothing runs
        specs = [m.mechanism_spec for m in mechanisms]
        budgets = [{f: getattr(s, f) for f in _BUDGET_FIELDS} for s in specs]
        for spec in specs:  # fail closed: no budget until the odometer admits the pipeline
            for field in _BUDGET_FIELDS:
                setattr(spec, field, None)
        declared = self._declare(specs, budgets, pld)
        if pld and self.fit:
            budgets, declared = self._fit(specs, budgets, declared)
        key = idempotency_key(self.dataset_id, self.run, mechanisms, declared)
        try:
            invocation = self.client.register(
                self.dataset_id,
                declared.mechanism,
                conversion_delta=declared.conversion_delta,
                idempotency_key=key,
            )
        except BudgetExceeded as exc:
            raise PipelineRefused(exc, declared.mechanism) from exc
        for spec, budget in zip(specs, budgets, strict=True):
            for field, value in budget.items():
                setattr(spec, field, value)
        self.invocation = invocation
        self.declared = declared
        self.charged_epsilon = invocation.charge.get("epsilon")
        self.charged_delta = invocation.charge.get("delta")

    def _declare(self, specs: list[Any], budgets: list[dict[str, Any]], pld: bool) -> Declared:
        budgeted = [_Budgeted(s, b) for s, b in zip(specs, budgets, strict=True)]
        return declaration(budgeted, pld=pld, total_delta=self.target_delta)

    def _over(self, declared: Declared) -> bool:
        """Would the odometer charge ``declared`` more than the target? (a preview: nothing is
        written; ``False`` when the preview states no charge)"""
        preview = self.client.preview(
            self.dataset_id, declared.mechanism, conversion_delta=declared.conversion_delta
        )
        epsilon, delta = preview.requested.get("epsilon"), preview.requested.get("delta")
        if not isinstance(epsilon, Decimal) or not isinstance(delta, Decimal):
            return False
        return epsilon > self.target_epsilon or delta > self.target_delta

    def _fit(
        self, specs: list[Any], budgets: list[dict[str, Any]], declared: Declared
    ) -> tuple[list[dict[str, Any]], Declared]:
        """The PLD accountant's budgets with every noise std multiplied by the least factor
        s ≥ 1 (to a relative 10⁻⁴, as PipelineDP's own search) at which the odometer charges
        at most the target — as if PipelineDP had found a base noise s times larger: each
        partition selection's (ε₀, δ₀) = (√2/std, ε₀·δ/ε) is divided by s. s = 1 (nothing
        changes) when PipelineDP's calibration already fits."""
        if not self._over(declared):
            return budgets, declared

        def scaled(factor: float) -> tuple[list[dict[str, Any]], Declared]:
            out = []
            for spec, budget in zip(specs, budgets, strict=True):
                b = dict(budget)
                if b["_noise_standard_deviation"] is not None:
                    b["_noise_standard_deviation"] *= factor
                elif _type_name(spec) in _PAIRS and b["_eps"] is not None:
                    b["_eps"] /= factor
                    b["_delta"] = None if b["_delta"] is None else b["_delta"] / factor
                out.append(b)
            return out, self._declare(specs, out, pld=True)

        low, high = 1.0, 2.0
        while self._over(scaled(high)[1]):
            low, high = high, high * 2
            if high > 2.0**20:
                raise ValueError("no noise within 2^20 times PipelineDP's fits the target")
        while high - low > 1e-4 * low:
            middle = (low + high) / 2
            if self._over(scaled(middle)[1]):
                low = middle
            else:
                high = middle
        self.noise_factor = high
        return scaled(high)


class _Budgeted:
    """A spec as it was when ``compute_budgets`` set it (the live one is emptied first)."""

    def __init__(self, spec: Any, budget: dict[str, Any]) -> None:
        self.mechanism_type = spec.mechanism_type
        self.name = spec.name
        self.count = spec.count
        for field, value in budget.items():
            setattr(self, field, value)


_BUILT: dict[str, type] = {}


def _pipeline_dp() -> Any:
    try:
        return importlib.import_module("pipeline_dp")
    except ImportError as exc:
        raise ImportError(
            "odometer_client.adapters.pipelinedp needs PipelineDP: pip install "
            "'privacy-odometer-client[pipelinedp]'"
        ) from exc


def _build(name: str) -> type:
    base: Any = getattr(_pipeline_dp().budget_accounting, name)
    pld = name == "PLDBudgetAccountant"

    def __init__(
        self: Any,
        client: Any,
        dataset: Any,
        total_epsilon: Any,
        total_delta: Any,
        *,
        run: str,
        headroom: float = HEADROOM,
        fit: bool = True,
        **kwargs: Any,
    ) -> None:
        epsilon, delta = self._odometer_init(
            client, dataset, total_epsilon, total_delta, run, headroom, fit
        )
        base.__init__(self, epsilon, delta, **kwargs)

    def compute_budgets(self: Any) -> None:
        base.compute_budgets(self)
        self._register(pld)

    doc = (
        f"PipelineDP's ``{name}`` whose ``compute_budgets()`` registers the pipeline with the "
        "odometer (see :mod:`odometer_client.adapters.pipelinedp`).\n\n"
        "``client`` an ``OdometerClient``, ``dataset`` a dataset or its id, (``total_epsilon``, "
        "``total_delta``) the most the pipeline may be charged, ``run`` the release's label, "
        "``headroom`` the relative margin left for the odometer's PLD; other keyword arguments "
        "are PipelineDP's."
    )
    return type(
        name,
        (_Odometer, base),
        {
            "__init__": __init__,
            "compute_budgets": compute_budgets,
            "__doc__": doc,
            "__module__": __name__,
        },
    )


def __getattr__(name: str) -> Any:
    """``NaiveBudgetAccountant`` and ``PLDBudgetAccountant``, built (importing PipelineDP) when
    first asked for."""
    if name in ("NaiveBudgetAccountant", "PLDBudgetAccountant"):
        if name not in _BUILT:
            _BUILT[name] = _build(name)
        return _BUILT[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
