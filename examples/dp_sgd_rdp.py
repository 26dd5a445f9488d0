"""DP-SGD training jobs registered on an ``rdp`` dataset, as an Opacus user states them.

A dataset of 60 000 records gets the budget (ε, δ) = (2, 1e-5) under RDP accounting. Each
training job (noise multiplier 1.1, batch size 256, 10 epochs) is declared *before* training
with ``declarations.dp_sgd``; the service composes the exact subsampled-Gaussian RDP curves.
Jobs are declared until one is refused before it can train: three fit (the dataset's filter
puts its order weights where the first job needs them, accounting 1.5.0; before, two did), the
fourth is refused. The ε the service reports matches ``dp_accounting``'s own RdpAccountant on
the same event.

    python examples/dp_sgd_rdp.py --url http://127.0.0.1:8000 --key "$KEY"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odometer_client import BudgetExceeded, OdometerClient, declarations


def _client(argv: Sequence[str] | None) -> OdometerClient:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    args = parser.parse_args(argv)
    return OdometerClient(args.url, args.key)


DATASET_SIZE, BATCH_SIZE, EPOCHS, NOISE_MULTIPLIER = 60_000, 256, 10, "1.1"
BUDGET_EPSILON, BUDGET_DELTA = "2", "0.00001"
#: jobs declared at most (the budget refuses one well before)
MAX_JOBS = 10


def dp_accounting_epsilon(
    noise_multiplier: float, rate: float, steps: int, orders: list[float], delta: float
) -> float:
    """What dp_accounting's RdpAccountant says for the same run, on the same orders."""
    import dp_accounting
    from dp_accounting import dp_event

    accountant = dp_accounting.rdp.RdpAccountant(orders)
    accountant.compose(
        dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(rate, dp_event.GaussianDpEvent(noise_multiplier)),
            steps,
        )
    )
    return float(accountant.get_epsilon(delta))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    client = _client(argv)
    with client:
        ds = client.create_dataset(
            "mnist-training", BUDGET_EPSILON, BUDGET_DELTA, accounting={"mode": "rdp"}
        )
        job = declarations.dp_sgd(
            NOISE_MULTIPLIER, epochs=EPOCHS, dataset_size=DATASET_SIZE, batch_size=BATCH_SIZE
        )
        print(f"dataset {ds.id}: budget ε={BUDGET_EPSILON}, δ={BUDGET_DELTA} (rdp)")
        print(f"job: σ={job.noise_multiplier}, q={job.sample_rate}, steps={job.steps}")
        accepted: list[str] = []
        rejected = 0
        for attempt in range(1, MAX_JOBS + 1):
            try:
                inv = client.register(ds, job)
            except BudgetExceeded as exc:
                rejected += 1
                print(f"job {attempt}: refused before training ({exc.detail})")
                break
            accepted.append(inv.id)
            spent = client.get_dataset(ds).spent["epsilon"]
            print(f"job {attempt}: {inv.status} {inv.id}; ε spent so far {spent:.4f}")
        final = client.get_dataset(ds)
        orders = [float(o) for o in final.status["orders"]]
        reference = dp_accounting_epsilon(
            float(job.noise_multiplier),
            float(job.sample_rate),
            job.steps * len(accepted),
            orders,
            float(BUDGET_DELTA),
        )
        spent_eps: Decimal = final.spent["epsilon"]
        print(f"service: ε = {spent_eps:.6f}; dp_accounting RdpAccountant: ε = {reference:.6f}")
        return {
            "dataset_id": ds.id,
            "steps": job.steps,
            "accepted": accepted,
            "rejected": rejected,
            "epsilon_spent": spent_eps,
            "dp_accounting_epsilon": reference,
        }


if __name__ == "__main__":
    main()
