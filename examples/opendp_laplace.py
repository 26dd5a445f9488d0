"""An OpenDP measurement, registered before it runs: released only if the odometer admits it.

The analyst builds a Laplace mean of clamped ages with OpenDP, asks OpenDP for its privacy
guarantee at one changed record (``meas.map(d_in)``), registers that guarantee with the odometer
and runs the measurement only if the registration was accepted. The third release would exceed
the dataset's budget: it is refused before any noise is drawn, and nothing is released.

    python examples/opendp_laplace.py --url http://127.0.0.1:8000 --key "$KEY"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import opendp.prelude as dp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odometer_client import BudgetExceeded, OdometerClient
from odometer_client.adapters.opendp import declaration

dp.enable_features("contrib")

BUDGET_EPSILON, BUDGET_DELTA = "1", "0.000001"
AGES = [float(a) for a in (23, 35, 41, 29, 62, 57, 33, 48, 51, 19, 44, 38)]


def _client(argv: Sequence[str] | None) -> OdometerClient:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    args = parser.parse_args(argv)
    return OdometerClient(args.url, args.key)


def mean_age(scale: float) -> Any:
    """Sum of ages clamped to [0, 100] over a known number of records, plus Laplace noise:
    one changed record (d_in = 2 under the symmetric distance) moves the sum by at most 100."""
    sized = dp.vector_domain(dp.atom_domain(bounds=(0.0, 100.0)), size=len(AGES))
    transformation = dp.t.make_sum(sized, dp.symmetric_distance())
    return transformation >> dp.m.then_laplace(scale=scale)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    client = _client(argv)
    meas = mean_age(scale=250.0)
    d_in = 2  # one record changed = one removed and one added
    decl = declaration(meas, d_in)
    print(f"OpenDP: ε = {meas.map(d_in)} at d_in = {d_in}; declared ε = {decl.epsilon}")
    released: list[float] = []
    refused = 0
    with client:
        ds = client.create_dataset("opendp-demo", BUDGET_EPSILON, BUDGET_DELTA)
        for _ in range(4):
            try:
                client.register(ds, decl)
            except BudgetExceeded as exc:
                refused += 1
                print(f"refused before running: remaining ε = {exc.remaining['epsilon']}")
                continue
            noisy_sum = meas(AGES)  # runs only after the odometer admitted it
            released.append(noisy_sum / len(AGES))
            print(f"released mean age ≈ {released[-1]:.1f}")
        spent: Decimal = client.get_dataset(ds).status["spent"]["epsilon"]
        print(f"spent ε = {spent} of {BUDGET_EPSILON}")
        return {
            "dataset_id": ds.id,
            "declared_epsilon": decl.epsilon,
            "opendp_epsilon": meas.map(d_in),
            "released": released,
            "refused": refused,
            "spent_epsilon": spent,
        }


if __name__ == "__main__":
    main()
