"""A PipelineDP pipeline whose budget is drawn from the odometer at ``compute_budgets()``.

The analyst counts visits and sums their values per region with PipelineDP (LocalBackend),
the regions chosen privately. Its PLD accountant is the adapter's: ``compute_budgets()`` works
out the noise as PipelineDP does, then registers the pipeline — two Gaussians and a partition
selection, one ``composed`` list — with the odometer, and the result is released only if the
odometer admitted it. The same pipeline under a second label on the spent dataset is refused:
no mechanism has a budget, and consuming its result fails before any noise is drawn.

Needs PipelineDP (``make adapters-env``; ``pip install 'privacy-odometer-client[pipelinedp]'``):

    .venv-adapters/bin/python examples/pipelinedp_regions.py --url URL --key "$KEY"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pipeline_dp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odometer_client import OdometerClient
from odometer_client.adapters.pipelinedp import PipelineRefused, PLDBudgetAccountant

VISITS = [(user, f"region-{user % 3}", float(user % 10)) for user in range(600)]


def _client(argv: Sequence[str] | None) -> OdometerClient:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    args = parser.parse_args(argv)
    return OdometerClient(args.url, args.key)


def visits_per_region(accountant: Any, noise: str = "GAUSSIAN") -> Any:
    """Count and sum per region; each user in at most 2 regions, values clamped to [0, 10];
    the regions chosen privately (PipelineDP's default selection). Lazy until consumed."""
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=getattr(pipeline_dp.NoiseKind, noise),
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM],
        max_partitions_contributed=2,
        max_contributions_per_partition=1,
        min_value=0,
        max_value=10,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda visit: visit[0],
        partition_extractor=lambda visit: visit[1],
        value_extractor=lambda visit: visit[2],
    )
    return engine.aggregate(VISITS, params, extractors)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    with _client(argv) as client:
        ds = client.create_dataset("visits", "1", "0.000001")  # a basic dataset of (1, 1e-6)
        accountant = PLDBudgetAccountant(client, ds, 1, 1e-6, run="visits per region, week 48")
        result = visits_per_region(accountant)
        accountant.compute_budgets()  # registers the pipeline; raises if it is refused
        released = dict(result)  # the noise is drawn here, after the odometer admitted it
        for region, metrics in sorted(released.items()):
            print(f"released {region}: count ≈ {metrics.count:.0f}, sum ≈ {metrics.sum:.0f}")
        print(f"charged ε = {accountant.charged_epsilon}, δ = {accountant.charged_delta}")

        second = PLDBudgetAccountant(client, ds, 1, 1e-6, run="visits per region, again")
        unreleased = visits_per_region(second)
        try:
            second.compute_budgets()
            refused = ""
        except PipelineRefused as exc:
            refused = str(exc)
            print(f"refused: {refused}")
        try:
            list(unreleased)
        except AssertionError:
            print("the refused pipeline has no budget: nothing was computed")
        return {
            "status": accountant.invocation.status,
            "charged_epsilon": accountant.charged_epsilon,
            "charged_delta": accountant.charged_delta,
            "released": released,
            "refused": refused,
        }


if __name__ == "__main__":
    main()
