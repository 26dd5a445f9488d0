"""Invocation declarations: what an analyst says will run, before it runs.

Every kind is an immutable, validated dataclass with a canonical JSON form. Parsing goes
through a **closed registry** (:data:`KINDS`): a payload's ``"type"`` selects one of the
classes listed there and nothing else is ever imported or constructed from a payload. A stored
``type`` never changes meaning; a new meaning gets a new kind.

The declarations say *what ran*; how it is counted lives in the modes of
:mod:`odometer_core.accounting.modes`, reached through :mod:`odometer_core.accounting.filters`
(events kept apart from accountants, as in Google's ``dp_accounting``).

Output-dependent (ODP) kinds — ``odp`` and the templates ``svt``, ``ptr``, ``iterative`` and
``tested_release`` — expose :meth:`OdpCapable.partition`: the named cells with their ε and the
single δ of the partition (Hartmann et al. 2022, Definition 2).

Concrete mechanisms whose whole proven guarantee is one an existing kind states —
``discrete_laplace`` (ε-DP), ``discrete_gaussian`` (ρ-zCDP), ``report_noisy_max`` (the
exponential mechanism, or ε-DP) and ``tree_aggregation`` (a Gaussian mechanism) — expose
:meth:`ChargedAs.charged_as`: that kind, which every mode charges (or refuses) in their place,
so that no charge formula is written twice.

The kinds live in :mod:`odometer_core.accounting.kinds`, one module per family (plain
guarantees and mechanisms, the mechanisms charged as another kind, the ODP kinds, the kinds
amplified by sampling, composition and selection); this module is the closed registry, its
parser, and the one place every kind is imported from. A kind's ``from_params`` validates its
own payload and reaches a nested mechanism only through the parser it is handed, so no kind can
be constructed from a payload without passing through the registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Final

from odometer_core.accounting.kinds.base import (
    CELL_NAME,
    CELL_NAME_PATTERN,
    MAX_CELLS,
    MAX_COMPOSED_ITEMS,
    MAX_COUNT,
    MAX_CURVE_POINTS,
    MAX_DEPTH,
    MAX_MECHANISM_PARAMETER,
    MAX_MIXTURE_COMPONENTS,
    MAX_ORDER,
    MAX_POPULATION,
    MAX_PRIVACY_PARAMETER,
    MAX_RUNS_MEAN,
    MAX_SAMPLE_SIZE,
    MAX_STEPS,
    MAX_TREES,
    RELATIONS,
    ChargedAs,
    Declaration,
    DeclarationError,
    Nested,
    OdpCapable,
    OdpPartition,
    Relation,
)
from odometer_core.accounting.kinds.composition import Composed, RepeatAndSelect
from odometer_core.accounting.kinds.fields import (
    NOISES,
    RUN_DISTRIBUTIONS,
    WITH_REPLACEMENT_INNER,
)
from odometer_core.accounting.kinds.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ReportNoisyMax,
    TreeAggregation,
)
from odometer_core.accounting.kinds.odp import ODP, PTR, SVT, Iterative, TestedRelease
from odometer_core.accounting.kinds.plain import (
    GDP,
    MCDP,
    ZCDP,
    ApproxDP,
    Exponential,
    Gaussian,
    Laplace,
    PureDP,
    RandomizedResponse,
    RDPCurve,
)
from odometer_core.accounting.kinds.sampling import (
    DPSGD,
    MixtureOfGaussians,
    SampledWithReplacement,
    Subsampled,
    TruncatedSubsampledGaussian,
)

__all__ = [
    "CELL_NAME",
    "CELL_NAME_PATTERN",
    "DPSGD",
    "GDP",
    "KINDS",
    "MAX_CELLS",
    "MAX_COMPOSED_ITEMS",
    "MAX_COUNT",
    "MAX_CURVE_POINTS",
    "MAX_DEPTH",
    "MAX_MECHANISM_PARAMETER",
    "MAX_MIXTURE_COMPONENTS",
    "MAX_ORDER",
    "MAX_POPULATION",
    "MAX_PRIVACY_PARAMETER",
    "MAX_RUNS_MEAN",
    "MAX_SAMPLE_SIZE",
    "MAX_STEPS",
    "MAX_TREES",
    "MCDP",
    "NOISES",
    "ODP",
    "PTR",
    "RELATIONS",
    "RUN_DISTRIBUTIONS",
    "SVT",
    "WITH_REPLACEMENT_INNER",
    "ZCDP",
    "ApproxDP",
    "ChargedAs",
    "Composed",
    "Declaration",
    "DeclarationError",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Exponential",
    "Gaussian",
    "Iterative",
    "Laplace",
    "MixtureOfGaussians",
    "Nested",
    "OdpCapable",
    "OdpPartition",
    "PureDP",
    "RDPCurve",
    "RandomizedResponse",
    "Relation",
    "RepeatAndSelect",
    "ReportNoisyMax",
    "SampledWithReplacement",
    "Subsampled",
    "TestedRelease",
    "TreeAggregation",
    "TruncatedSubsampledGaussian",
    "parse_declaration",
]

#: The closed registry: the only classes a payload can name.
KINDS: Final[dict[str, type[Declaration]]] = {
    cls.kind: cls
    for cls in (
        PureDP,
        ApproxDP,
        ZCDP,
        RDPCurve,
        GDP,
        MCDP,
        Gaussian,
        Laplace,
        RandomizedResponse,
        Exponential,
        DiscreteLaplace,
        DiscreteGaussian,
        ReportNoisyMax,
        TreeAggregation,
        ODP,
        SVT,
        PTR,
        Iterative,
        TestedRelease,
        Subsampled,
        Composed,
        RepeatAndSelect,
        DPSGD,
        MixtureOfGaussians,
        SampledWithReplacement,
        TruncatedSubsampledGaussian,
    )
}


def _parse(obj: object, depth: int) -> Declaration:
    if depth > MAX_DEPTH:
        raise DeclarationError(f"declarations may nest at most {MAX_DEPTH} levels")
    if not isinstance(obj, Mapping):
        raise DeclarationError("a mechanism must be a JSON object with a 'type'")
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in KINDS:
        raise DeclarationError(
            f"unknown mechanism type {kind!r}; expected one of {', '.join(sorted(KINDS))}",
            field="type",
        )
    return KINDS[kind].from_params(obj, partial(_parse, depth=depth + 1))


def parse_declaration(obj: object) -> Declaration:
    """Validate a JSON object and build its declaration (closed registry, no imports).

    Raises :class:`DeclarationError` with a message that names the offending field.
    """
    return _parse(obj, 0)
