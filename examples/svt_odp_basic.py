"""Sparse vector (SVT) with output-dependent settlement on a ``basic`` dataset.

Each SVT run (ε₁ = 0.1, ε₂ = 0.3, at most c = 3 ⊤ answers) reserves its worst cell
ε₁ + ε₂ = 0.4, runs, and settles to the cell ``tops=k`` of the k ⊤ answers it released
(ε = ε₁ + (k/c)·ε₂): the rest is refunded. A run whose data fails to load before the
mechanism ran is cancelled by the ``reserve`` block (full refund). The saving is the budget
worst-case charging would have used minus what settlement used.

    python examples/svt_odp_basic.py --url http://127.0.0.1:8000 --key "$KEY"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odometer_client import OdometerClient, declarations


def _client(argv: Sequence[str] | None) -> OdometerClient:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    args = parser.parse_args(argv)
    return OdometerClient(args.url, args.key)


EPSILON1, EPSILON2, C = Decimal("0.1"), Decimal("0.3"), 3
BUDGET_EPSILON, BUDGET_DELTA = "2", "0.000001"
SEED = 2026


def sparse_vector(
    answers: Sequence[float],
    threshold: float,
    epsilon1: float,
    epsilon2: float,
    c: int,
    rng: np.random.Generator,
) -> int:
    """AboveThreshold with up to c ⊤ answers (sensitivity 1); returns how many ⊤ it released."""
    noisy_threshold = threshold + rng.laplace(scale=1 / epsilon1)
    tops = 0
    for answer in answers:
        if answer + rng.laplace(scale=2 * c / epsilon2) >= noisy_threshold:
            tops += 1
            if tops == c:
                break
    return tops


class DataUnavailable(RuntimeError):
    pass


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    client = _client(argv)
    rng = np.random.default_rng(SEED)
    # four batches of counting queries over a synthetic population; thresholds of interest
    batches = [rng.poisson(lam, size=20).astype(float).tolist() for lam in (100, 480, 520, 2000)]
    threshold = 500.0
    mechanism = declarations.svt(EPSILON1, EPSILON2, C)
    worst = EPSILON1 + EPSILON2
    with client:
        ds = client.create_dataset("svt-demo", BUDGET_EPSILON, BUDGET_DELTA)
        print(f"dataset {ds.id}: budget ε={BUDGET_EPSILON} (basic); each SVT reserves ε={worst}")
        settled: list[tuple[str, Decimal]] = []
        for n, answers in enumerate(batches, start=1):
            with client.reserve(ds, mechanism) as r:
                tops = sparse_vector(answers, threshold, float(EPSILON1), float(EPSILON2), C, rng)
                done = r.settle(f"tops={tops}")
            settled.append((done.cell or "", done.charge["epsilon"]))
            print(
                f"run {n}: {tops} ⊤ answers → cell {done.cell}: charged ε={done.charge['epsilon']}"
                f", refunded ε={done.refund['epsilon']}"
            )
        cancelled = 0
        try:
            with client.reserve(ds, mechanism) as r:
                raise DataUnavailable("the query batch could not be loaded")
        except DataUnavailable:
            cancelled += 1
            print(
                f"run {len(batches) + 1}: failed before the mechanism ran → {r.status} "
                f"(ε {r.result.refund['epsilon'] if r.result else '?'} refunded)"
            )
        final = client.get_dataset(ds)
        spent: Decimal = final.status["spent"]["epsilon"]
        worst_case = worst * len(settled)
        saving = worst_case - spent
        print(
            f"spent with settlement: ε={spent}; worst-case charging: ε={worst_case}; "
            f"saving ε={saving} ({saving / worst_case:.0%})"
        )
        print(f"remaining ε={final.remaining_epsilon}")
        return {
            "dataset_id": ds.id,
            "cells": [cell for cell, _ in settled],
            "settled_epsilons": [eps for _, eps in settled],
            "worst_epsilon": worst,
            "spent_epsilon": spent,
            "worst_case_epsilon": worst_case,
            "saving": saving,
            "cancelled": cancelled,
            "remaining_epsilon": final.remaining_epsilon,
        }


if __name__ == "__main__":
    main()
