"""A ``split`` dataset: DP-SGD training on an ``rdp`` sub-budget, SVT and Laplace queries on a
``basic`` sub-budget with ODP settlement, under one total budget.

    python examples/split_mixed.py --url http://127.0.0.1:8000 --key "$KEY"
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


ACCOUNTING = {
    "mode": "split",
    "sub_budgets": [
        {
            "name": "training",
            "budget": {"epsilon": "3", "delta": "0.00001"},
            "accounting": {"mode": "rdp"},
        },
        {"name": "queries", "budget": {"epsilon": "1"}, "accounting": {"mode": "basic"}},
    ],
}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    client = _client(argv)
    with client:
        ds = client.create_dataset("clinic", "4", "0.00001", accounting=ACCOUNTING)
        print(f"dataset {ds.id}: total ε=4, δ=1e-5 split into training (rdp) and queries (basic)")
        job = declarations.dp_sgd("1.1", epochs=10, dataset_size=60_000, batch_size=256)
        training = client.register(ds, job, sub_budget="training")
        print(f"training job {training.id}: {training.status} on sub-budget 'training'")

        count = client.register(ds, declarations.laplace("5"), sub_budget="queries")  # ε = 1/5
        print(f"Laplace count {count.id}: charged ε={count.charge['epsilon']} on 'queries'")

        with client.reserve(ds, declarations.svt("0.1", "0.4", 2), sub_budget="queries") as r:
            tops = 1  # the SVT released one ⊤ answer
            svt = r.settle(f"tops={tops}")
        print(
            f"SVT {svt.id}: settled to {svt.cell}: ε={svt.charge['epsilon']}, "
            f"refunded ε={svt.refund['epsilon']}"
        )

        refused = False
        try:
            client.register(ds, declarations.pure_dp("0.75"), sub_budget="queries")
        except BudgetExceeded as exc:
            refused = True
            print(f"a query of ε=0.75 is refused on 'queries': remaining ε={exc.remaining_epsilon}")

        final = client.get_dataset(ds)
        queries = final.sub_budget_status("queries")
        training_status = final.sub_budget_status("training")
        queries_spent: Decimal = queries["spent"]["epsilon"]
        training_eps: Decimal = training_status["spent_eps_delta"]["epsilon"]
        print(f"queries: spent ε={queries_spent}, remaining ε={queries['remaining']['epsilon']}")
        print(f"training: ε={training_eps:.4f} at δ=1e-5 (of ε=3)")
        return {
            "dataset_id": ds.id,
            "training_status": training.status,
            "laplace_epsilon": count.charge["epsilon"],
            "svt_cell": svt.cell,
            "svt_epsilon": svt.charge["epsilon"],
            "svt_refund": svt.refund["epsilon"],
            "queries_spent": queries_spent,
            "queries_remaining": queries["remaining"]["epsilon"],
            "training_epsilon": training_eps,
            "refused": refused,
        }


if __name__ == "__main__":
    main()
