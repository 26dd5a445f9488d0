"""The PipelineDP adapter's declaration and idempotency key, without PipelineDP: mechanism specs
as ``compute_budgets()`` leaves them (stand-ins with the same fields as pipeline-dp 0.3's
``MechanismSpec``). The accountants themselves are tested with the real library in
``tests/adapters/test_pipelinedp.py``."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Any

import pytest

from odometer_client.adapters import pipelinedp as adapter
from odometer_client.errors import BudgetExceeded


class Kind(Enum):
    GAUSSIAN = "Gaussian"
    LAPLACE = "Laplace"
    TRUNCATED_GEOMETRIC = "Truncated Geometric"
    GAUSSIAN_THRESHOLDING = "Gaussian Thresholding"


@dataclass
class Spec:
    mechanism_type: Kind
    name: str = ""
    _noise_standard_deviation: float | None = None
    _eps: float | None = None
    _delta: float | None = None
    count: int = 1
    _thresholding_delta: float | None = None


@dataclass
class Internal:
    mechanism_spec: Spec
    weight: float = 1 / 3
    sensitivity: float = 1
    extra: dict[str, Any] = field(default_factory=dict)


STD = 7.31744384765625  # PipelineDP's PLD noise for count + sum + selection at (1, 1e-6)
EPS0 = math.sqrt(2) / STD
DELTA0 = EPS0 * 1e-6


def pld_pipeline() -> list[Spec]:
    return [
        Spec(Kind.GAUSSIAN, "Count", _noise_standard_deviation=STD),
        Spec(Kind.GAUSSIAN, "Sum", _noise_standard_deviation=STD),
        Spec(Kind.TRUNCATED_GEOMETRIC, "PartitionSelection", _eps=EPS0, _delta=DELTA0),
    ]


def test_a_pld_pipeline_is_its_noise_and_the_selection_pair() -> None:
    declared = adapter.declaration(pld_pipeline(), pld=True, total_delta=Decimal("0.000001"))
    items = declared.mechanism.to_json()["mechanisms"]
    assert [i["type"] for i in items] == ["gaussian", "gaussian", "approx_dp"]
    sigma = Decimal(items[0]["sigma"])
    # read down: below the float std, by the 2^-40 margin and 17 digits at most
    assert Decimal(STD) * (1 - Decimal(2) ** -39) < sigma < Decimal(STD)
    assert items[0]["sensitivity"] == "1"
    eps, delta = Decimal(items[2]["epsilon"]), Decimal(items[2]["delta"])
    assert Decimal(EPS0) <= eps <= Decimal(EPS0) * (1 + Decimal("1e-16"))
    assert Decimal(DELTA0) <= delta <= Decimal(DELTA0) * (1 + Decimal("1e-16"))
    # the Gaussians are converted at what the selection's δ leaves of the total: charge δ = total
    assert declared.conversion_delta == Decimal("0.000001") - delta


def test_laplace_noise_is_its_scale_and_counts_repeat() -> None:
    spec = Spec(Kind.LAPLACE, "Sum", _noise_standard_deviation=2.0, count=4)
    declared = adapter.declaration([spec, spec], pld=True, total_delta=Decimal(0))
    first = declared.mechanism.to_json()["mechanisms"][0]
    assert first["count"] == 4
    scale = Decimal(first["mechanism"]["scale"])
    assert scale < Decimal(2) / Decimal(2).sqrt() < scale * (1 + Decimal("1e-12"))
    assert declared.conversion_delta is None  # no Gaussian: nothing to convert


def test_a_naive_pipeline_is_each_mechanisms_epsilon_and_delta() -> None:
    specs = [
        Spec(Kind.LAPLACE, "Count", _eps=1 / 3, _delta=0),
        Spec(Kind.GAUSSIAN, "Sum", _eps=1 / 3, _delta=1e-6 / 2),
        Spec(Kind.GAUSSIAN_THRESHOLDING, "Selection", _eps=1 / 3, _delta=1e-6 / 2),
    ]
    declared = adapter.declaration(specs, pld=False, total_delta=Decimal("0.000001"))
    items = declared.mechanism.to_json()["mechanisms"]
    assert [i["type"] for i in items] == ["pure_dp", "approx_dp", "approx_dp"]
    assert items[0]["epsilon"] == "0.33333333333333332"  # 1/3 as a float, rounded up
    assert declared.conversion_delta is None


def test_what_cannot_be_declared_is_refused_before_anything_is_sent() -> None:
    threshold = Spec(Kind.GAUSSIAN_THRESHOLDING, "Selection", 3.0, _thresholding_delta=1e-7)
    with pytest.raises(ValueError, match="thresholding adds a δ"):
        adapter.declaration([threshold], pld=True, total_delta=Decimal("0.000001"))
    with pytest.raises(ValueError, match="no noise"):
        adapter.declaration(
            [Spec(Kind.GAUSSIAN, _noise_standard_deviation=0.0)],
            pld=True,
            total_delta=Decimal("0.000001"),
        )
    with pytest.raises(ValueError, match="not a number"):
        adapter.declaration([Spec(Kind.GAUSSIAN)], pld=True, total_delta=Decimal("0.000001"))
    greedy = [
        Spec(Kind.GAUSSIAN, _noise_standard_deviation=1.0),
        Spec(Kind.TRUNCATED_GEOMETRIC, _eps=0.1, _delta=1e-6, count=2),
    ]
    with pytest.raises(ValueError, match="leave no δ"):
        adapter.declaration(greedy, pld=True, total_delta=Decimal("0.000001"))
    with pytest.raises(ValueError, match="no budget"):
        adapter.declaration([], pld=True, total_delta=Decimal("0.000001"))


def test_the_key_is_the_pipeline_and_the_run() -> None:
    specs = pld_pipeline()
    declared = adapter.declaration(specs, pld=True, total_delta=Decimal("0.000001"))
    mechanisms = [Internal(s) for s in specs]
    key = adapter.idempotency_key("ds_1", "week 48", mechanisms, declared)
    assert key.startswith("pipelinedp-") and len(key) == len("pipelinedp-") + 64
    assert key == adapter.idempotency_key("ds_1", "week 48", [Internal(s) for s in specs], declared)
    assert key != adapter.idempotency_key("ds_1", "week 49", mechanisms, declared)
    assert key != adapter.idempotency_key("ds_2", "week 48", mechanisms, declared)
    renamed = [Internal(Spec(Kind.GAUSSIAN, "Mean", _noise_standard_deviation=STD))]
    assert key != adapter.idempotency_key("ds_1", "week 48", renamed + mechanisms[1:], declared)
    noisier = pld_pipeline()
    noisier[0]._noise_standard_deviation = 2 * STD
    other = adapter.declaration(noisier, pld=True, total_delta=Decimal("0.000001"))
    assert key != adapter.idempotency_key("ds_1", "week 48", mechanisms, other)


def test_a_refusal_says_why_and_what_fits() -> None:
    body = {
        "error": "BudgetExceeded",
        "detail": "epsilon budget exceeded",
        "requested": {"epsilon": "1.2", "delta": "0.000001"},
        "remaining": {"epsilon": "0.5", "delta": "0.000001"},
        "summary": {
            "text": "refused by the dataset budget: epsilon budget exceeded; left ε 0.5",
            "instead": {"type": "gaussian", "sigma": "15"},
        },
    }
    declared = adapter.declaration(pld_pipeline(), pld=True, total_delta=Decimal("0.000001"))
    refused = adapter.PipelineRefused(BudgetExceeded(409, body), declared.mechanism)
    assert isinstance(refused, BudgetExceeded)
    assert str(refused) == (
        "the odometer refused the pipeline, so no noise was drawn: refused by the dataset "
        'budget: epsilon budget exceeded; left ε 0.5; would fit instead: {"sigma": "15", '
        '"type": "gaussian"}'
    )
    assert refused.requested_epsilon == Decimal("1.2")
    assert refused.instead == {"type": "gaussian", "sigma": "15"}
    body.pop("summary")
    bare = adapter.PipelineRefused(BudgetExceeded(409, body), declared.mechanism)
    assert str(bare).endswith("no noise was drawn: epsilon budget exceeded")
    assert bare.instead is None


@pytest.mark.skipif(
    importlib.util.find_spec("pipeline_dp") is not None, reason="PipelineDP is installed"
)
def test_without_pipeline_dp_the_accountants_say_what_to_install() -> None:
    with pytest.raises(ImportError, match=r"privacy-odometer-client\[pipelinedp\]"):
        adapter.PLDBudgetAccountant  # noqa: B018
    with pytest.raises(AttributeError):
        adapter.NoSuchAccountant  # noqa: B018
