"""The PipelineDP accountants against a served app, with the real library (pipeline-dp 0.3.1 on
LocalBackend): a pipeline of a count and a sum with private partition selection is registered
once at ``compute_budgets()`` and its result released; a retried driver is charged once; a
refused pipeline leaves every mechanism without a budget, and consuming its result fails before
any noise is drawn. Skipped where ``pipeline_dp`` is not importable (the main venv): ``make
test`` runs them in ``.venv-adapters``."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterator
from decimal import Decimal
from types import ModuleType
from typing import Any

import pytest

from odometer_client import OdometerClient
from tests.client.live import ADMIN_KEY, Server
from tests.support import ROOT

pipeline_dp = pytest.importorskip("pipeline_dp")

from odometer_client.adapters import pipelinedp as adapter  # noqa: E402

BUDGET = ("1", "0.000001")


def _example() -> ModuleType:
    path = ROOT / "examples" / "pipelinedp_regions.py"
    spec = importlib.util.spec_from_file_location("examples_pipelinedp_regions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = _example()


def aggregate(accountant: Any, noise: str = "GAUSSIAN") -> Any:
    """The example's pipeline: a count and a sum per region of 600 users, each in at most 2
    regions, values in [0, 10], regions chosen privately; lazy until consumed."""
    return EXAMPLE.visits_per_region(accountant, noise)


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every noise draw and partition selection PipelineDP makes, by name."""
    seen: list[str] = []
    computations = pipeline_dp.dp_computations
    for cls in (computations.GaussianMechanism, computations.LaplaceMechanism):
        real = cls.add_noise

        def counted(self: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            seen.append(type(self).__name__)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(cls, "add_noise", counted)
    selection = pipeline_dp.partition_selection
    real_select = selection.create_partition_selection_strategy

    def select(*args: Any, **kwargs: Any) -> Any:
        seen.append("partition selection")
        return real_select(*args, **kwargs)

    monkeypatch.setattr(selection, "create_partition_selection_strategy", select)
    yield seen


def _ledger_registrations(client: OdometerClient, ds: Any) -> list[Any]:
    return [
        e for e in client.ledger(ds) if e.kind in ("invocation_accepted", "invocation_rejected")
    ]


def test_a_pld_pipeline_is_admitted_at_its_budget_and_released(
    client: OdometerClient, draws: list[str]
) -> None:
    ds = client.create_dataset("pipelinedp-pld", *BUDGET)
    accountant = adapter.PLDBudgetAccountant(client, ds, 1, 1e-6, run="regions 2026-11")
    result = aggregate(accountant)
    accountant.compute_budgets()
    released = dict(result)
    assert sorted(released) == ["region-0", "region-1", "region-2"]
    assert {"GaussianMechanism", "partition selection"} <= set(draws)

    # declared from the mechanisms and their noise: two Gaussians of PipelineDP's std per unit
    # of sensitivity and the selection's (ε₀, δ₀), one composed list
    specs = accountant.mechanism_specs
    assert [s.mechanism_type.name for s in specs] == ["GAUSSIAN", "GAUSSIAN", "TRUNCATED_GEOMETRIC"]
    items = accountant.declared.mechanism.to_json()["mechanisms"]
    assert [i["type"] for i in items] == ["gaussian", "gaussian", "approx_dp"]
    std = specs[0].noise_standard_deviation
    assert Decimal(std) * (1 - Decimal(2) ** -39) < Decimal(items[0]["sigma"]) <= Decimal(std)
    assert Decimal(items[2]["epsilon"]) >= Decimal(specs[2].eps)
    assert specs[2].eps == pytest.approx(math.sqrt(2) / std, rel=1e-12)
    assert accountant.declared.conversion_delta == Decimal("0.000001") - Decimal(items[2]["delta"])

    invocation = accountant.invocation
    assert invocation.status == "accepted"
    assert accountant.charged_delta == Decimal("0.000001")
    assert accountant.charged_epsilon <= 1
    spent = client.get_dataset(ds).status["spent"]
    assert spent["epsilon"] == accountant.charged_epsilon
    assert len(_ledger_registrations(client, ds)) == 1


def test_a_naive_pipeline_is_admitted_at_its_budget(client: OdometerClient) -> None:
    ds = client.create_dataset("pipelinedp-naive", *BUDGET)
    accountant = adapter.NaiveBudgetAccountant(client, ds, 1, 1e-6, run="naive")
    result = aggregate(accountant, noise="LAPLACE")
    accountant.compute_budgets()
    assert len(dict(result)) == 3
    items = accountant.declared.mechanism.to_json()["mechanisms"]
    # Laplace count and sum are ε-DP; the selection spends all the δ
    assert [i["type"] for i in items] == ["pure_dp", "pure_dp", "approx_dp"]
    assert accountant.declared.conversion_delta is None
    assert accountant.invocation.status == "accepted"
    assert accountant.charged_epsilon <= 1 and accountant.charged_delta <= Decimal("0.000001")


def test_a_retried_driver_is_charged_once(client: OdometerClient) -> None:
    ds = client.create_dataset("pipelinedp-retry", *BUDGET)
    first = adapter.PLDBudgetAccountant(client, ds, 1, 1e-6, run="retry")
    aggregate(first)
    first.compute_budgets()
    spent = client.get_dataset(ds).status["spent"]
    # the driver restarts: the same pipeline is built again, under the same label
    again = adapter.PLDBudgetAccountant(client, ds, 1, 1e-6, run="retry")
    result = aggregate(again)
    again.compute_budgets()
    assert again.invocation.id == first.invocation.id
    assert len(dict(result)) == 3
    assert client.get_dataset(ds).status["spent"] == spent
    assert len(_ledger_registrations(client, ds)) == 1
    # a new label is a new release: the budget is spent, so it is refused
    other = adapter.PLDBudgetAccountant(client, ds, 1, 1e-6, run="retry, second release")
    aggregate(other)
    with pytest.raises(adapter.PipelineRefused):
        other.compute_budgets()
    assert client.get_dataset(ds).status["spent"] == spent


def test_a_refused_pipeline_draws_no_noise(client: OdometerClient, draws: list[str]) -> None:
    ds = client.create_dataset("pipelinedp-small", "0.5", "0.000001")
    accountant = adapter.PLDBudgetAccountant(client, ds, 1, 1e-6, run="too much")
    result = aggregate(accountant)
    with pytest.raises(adapter.PipelineRefused) as refused:
        accountant.compute_budgets()
    message = str(refused.value)
    assert message.startswith("the odometer refused the pipeline, so no noise was drawn: ")
    assert refused.value.summary is not None
    assert refused.value.summary["text"] in message
    if refused.value.instead is not None:
        assert "would fit instead" in message
    assert refused.value.status_code == 409
    try:  # consuming the result fails before any noise is drawn
        released = list(result)
    except AssertionError as exc:
        assert "not calculated yet" in str(exc)
        released = []
    assert (released, draws) == ([], [])
    for spec in accountant.mechanism_specs:
        assert spec._noise_standard_deviation is None and spec._eps is None
    assert client.get_dataset(ds).status["spent"]["epsilon"] == 0


def test_the_example_runs(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    module = _example()
    result = module.main(["--url", server.base_url, "--key", ADMIN_KEY])
    assert result["status"] == "accepted"
    assert result["charged_epsilon"] <= 1
    assert len(result["released"]) == 3
    assert result["refused"].startswith("the odometer refused the pipeline")
    out = capsys.readouterr().out
    assert "released" in out and "refused" in out
