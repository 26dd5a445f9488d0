"""A Tumult Analytics session whose queries draw their budget from the odometer.

The analyst's Session has its own budget of ε = 2; the dataset on the odometer has (1, 10⁻⁶).
Each ``evaluate`` is registered with the odometer before it is measured: a count (ε 0.5) and a
count per region (ε 0.25) are admitted and released; a sum (ε 0.5), which the Session alone
would still answer, is refused by the odometer and nothing is measured. A query the Session
itself refuses is never sent.

Needs Tumult Analytics, which pins numpy < 2, and Java 17 (``make tumult-env``):

    .venv-tumult/bin/python examples/tumult_regions.py --url URL --key "$KEY"
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odometer_client import OdometerClient
from odometer_client.adapters.tumult import OdometerSession, QueryRefused, SessionRefused

tmlt = importlib.import_module("tmlt.analytics")


def _client(argv: Sequence[str] | None) -> OdometerClient:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    args = parser.parse_args(argv)
    return OdometerClient(args.url, args.key)


def visits(spark: Any) -> Any:
    """120 visits: a user, one of 3 regions, minutes in [0, 30)."""
    rows = [(user, f"region-{user % 3}", user % 30) for user in range(120)]
    return spark.createDataFrame(rows, ["user", "region", "minutes"])


def main(argv: Sequence[str] | None = None, spark: Any = None) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's workers: this venv
    if spark is None:
        builder = importlib.import_module("pyspark.sql").SparkSession.builder
        spark = builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    regions = tmlt.KeySet.from_dict({"region": ["region-0", "region-1", "region-2"]})
    with _client(argv) as client:
        ds = client.create_dataset("visits", "1", "0.000001")  # a basic dataset of (1, 1e-6)
        session = OdometerSession.from_dataframe(
            client,
            ds,
            tmlt.PureDPBudget(2),  # the Session's own budget: more than the odometer allows
            "visits",
            visits(spark),
            tmlt.AddOneRow(),  # added or removed rows: the dataset's relation, add_remove
            run="visits, week 48",
        )
        total = session.evaluate(tmlt.QueryBuilder("visits").count(), tmlt.PureDPBudget(0.5))
        per_region = session.evaluate(
            tmlt.QueryBuilder("visits").groupby(regions).count(), tmlt.PureDPBudget(0.25)
        )
        released = {"total": total.collect()[0]["count"]}
        for row in per_region.collect():
            released[row["region"]] = row["count"]
        for name, count in released.items():
            print(f"released {name}: count ≈ {count}")
        spent = client.get_dataset(ds).status["spent"]["epsilon"]
        print(
            f"the odometer charged ε = {spent}; the Session has {session.remaining_privacy_budget}"
        )

        refused = ""
        try:
            session.evaluate(
                tmlt.QueryBuilder("visits").sum("minutes", 0, 29), tmlt.PureDPBudget(0.5)
            )
        except QueryRefused as exc:
            refused = str(exc)
            print(f"refused: {refused}")
        try:
            session.evaluate(tmlt.QueryBuilder("visits").count(), tmlt.PureDPBudget(1.5))
        except SessionRefused as exc:
            print(f"the Session refused, nothing sent: {exc}")
        return {
            "declarations": [d.to_json() for d in session.declarations],
            "spent": spent,
            "released": released,
            "refused": refused,
            "left": session.remaining_privacy_budget,
        }


if __name__ == "__main__":
    main()
