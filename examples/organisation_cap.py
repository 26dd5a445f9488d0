"""An organisation cap in the curator's currency: a hospital's zCDP cap of (ε = 10, δ = 1e-5)
over three datasets in different modes, Gaussian queries spread over them until the cap
refuses, the cap's own count of what it still admits, and the auditor's replay of the cap.

    python examples/organisation_cap.py --url http://127.0.0.1:8000 --key "$ADMIN_KEY"

The admin key makes the organisation and its curator; the curator sets the cap, makes the
wards and grants an analyst, who runs the queries. A ``basic`` cap of the same (10, 1e-5)
refuses the eleventh of these Gaussians (docs/accounting.md, *Organisation caps*).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odometer_client import BudgetExceeded, OdometerClient, declarations

CAP = {"mode": "zcdp"}


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="an admin key (default $ODOMETER_API_KEY)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = _args(argv)
    with OdometerClient(args.url, args.key) as admin:
        org = admin.create_organisation(f"hospital-{secrets.token_hex(3)}").id
        curator = admin.create_principal("cora", "curator", organisation_id=org).id
        key = admin.issue_key(curator).key
    with OdometerClient(args.url, key) as client:
        client.set_organisation_cap(org, "10", "0.00001", accounting=CAP)
        datasets = [
            client.create_dataset(f"ward-{mode}", "1000", "0.001", accounting={"mode": mode})
            for mode in ("zcdp", "rdp", "gdp")
        ]
        analyst = client.create_principal("ana", "analyst").id
        for ds in datasets:
            client.grant(ds, analyst)
        query = declarations.gaussian("10", sensitivity="1")
        first = client.organisation_cap_capacity(org, query)
        print(f"the zcdp cap admits {first.count} Gaussians σ=10 (a basic cap: 10)")
        admitted, refusal, level = 0, "", None
        with OdometerClient(args.url, client.issue_key(analyst).key) as ana:
            while level is None:
                try:
                    ana.register(datasets[admitted % 3], query)
                    admitted += 1
                except BudgetExceeded as exc:
                    refusal, level = exc.detail, exc.body.get("level")
        print(f"{admitted} admitted over three wards, then refused at the {level} level:")
        print(f"  {refusal}")
        report = client.organisation_report(org)
        drawn = {d.name: d.drawn for d in report.datasets}
        print(f"replayed from the wards' ledgers: verified={report.verified}")
        for name, amount in drawn.items():
            print(f"  {name} drew ρ={amount.get('rho', 0)}")
        return {
            "organisation": org,
            "capacity": first.count,
            "admitted": admitted,
            "level": level,
            "refusal": refusal,
            "verified": report.verified,
            "drawn_rho": {name: Decimal(str(a.get("rho", "0"))) for name, a in drawn.items()},
            "reading": report.odometer,
        }


if __name__ == "__main__":
    main()
