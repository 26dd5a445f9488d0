"""What an organisation cap admits in each currency, today's ``basic`` cap beside it.

An organisation cap of (ε, δ) = (10, 10⁻⁵) over three datasets whose own budgets are large
(1000, 10⁻³), three workloads, each run against the service in process (the registration
route, every level deciding) until the cap refuses:

1. Gaussians σ = 10 (sensitivity 1), round robin over three ``zcdp`` datasets; beside it, what
   one ``zcdp`` dataset of (10, 10⁻⁵) admits;
2. DP-SGD chunks (100 steps, q = 0.01, σ = 1) round robin over three ``rdp`` datasets; beside
   it, one ``rdp`` dataset of (10, 10⁻⁵) whose grid was chosen for that workload;
3. complete rounds of [pure ε = 0.05 on a ``basic`` dataset, a Gaussian σ = 10 on a ``zcdp``
   dataset, a DP-SGD chunk on an ``rdp`` dataset].

Caps: ``basic`` (the only cap before caps had modes; curve-based declarations converted at
δ_cap/10), ``zcdp``, ``rdp`` on the default grid, ``rdp`` with the workload declared, ``gdp``.
Curve caps keep 1 % of δ for approximate declarations (the default). "422" means the cap's
mode cannot account the workload's declarations (a refusal with the reason, nothing charged).

Run from the repository root:

    .venv/bin/python -m benchmarks caps

Writes the section between the ``caps`` markers of ``benchmarks/RESULTS.md`` and prints it
(``--no-results``: print only).
"""

from __future__ import annotations

import argparse
import itertools
import platform
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from benchmarks.results import write_section
from benchmarks.service_setup import migrate
from odometer_core.accounting import capacity, initial_state, make_config, parse_declaration

BEGIN, END = "<!-- caps:begin -->", "<!-- caps:end -->"
ADMIN_KEY = "bench-admin-key-" + "x" * 16
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
CAP = {"epsilon": "10", "delta": "0.00001"}
_NAMES = itertools.count()

GAUSSIAN: dict[str, Any] = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}
DPSGD: dict[str, Any] = {
    "type": "dp_sgd",
    "noise_multiplier": "1",
    "sample_rate": "0.01",
    "steps": 100,
}
PURE: dict[str, Any] = {"type": "pure_dp", "epsilon": "0.05"}
WORKLOAD = [{"mechanism": DPSGD, "count": 200}]

#: cap label → its ``accounting`` object
CAPS: dict[str, dict[str, Any]] = {
    "basic (today)": {"mode": "basic"},
    "zcdp": {"mode": "zcdp"},
    "rdp": {"mode": "rdp"},
    "rdp + workload": {"mode": "rdp", "workload": WORKLOAD},
    "gdp": {"mode": "gdp"},
}

#: workload label → (dataset modes, the round's (dataset index, mechanism) steps)
WORKLOADS: dict[str, tuple[tuple[str, ...], tuple[tuple[int, dict[str, Any]], ...]]] = {
    "Gaussian σ=10 over 3 zcdp datasets": (("zcdp",) * 3, ((0, GAUSSIAN),)),
    "DP-SGD chunk over 3 rdp datasets": (("rdp",) * 3, ((0, DPSGD),)),
    "rounds [pure ε=0.05 basic, Gaussian zcdp, DP-SGD rdp]": (
        ("basic", "zcdp", "rdp"),
        ((0, PURE), (1, GAUSSIAN), (2, DPSGD)),
    ),
}


@contextmanager
def service() -> Iterator[TestClient]:
    """The service in process over a fresh SQLite database."""
    from app.main import create_app
    from app.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'caps.db'}"
        migrate(url)
        with TestClient(create_app(Settings(database_url=url, admin_key=ADMIN_KEY))) as client:
            yield client


def _post(client: TestClient, path: str, body: Any, *, method: str = "POST") -> Any:
    r = client.request(method, path, json=body, headers=AUTH)
    if r.status_code >= 400:
        raise RuntimeError(f"{method} {path}: {r.status_code} {r.text}")
    return r.json()


def admitted(client: TestClient, cap: dict[str, Any], workload: str, limit: int) -> str:
    """Complete rounds of ``workload`` the organisation admits under ``cap`` (single-step rounds
    count invocations), or why the cap refuses the workload's declarations."""
    modes, steps = WORKLOADS[workload]
    org = _post(client, "/v1/organisations", {"name": f"org-{next(_NAMES)}"})["id"]
    datasets = [
        _post(
            client,
            "/v1/datasets",
            {
                "name": f"d{i}",
                "budget": {"epsilon": "1000", "delta": "0.001"},
                "accounting": {"mode": mode}
                if mode == "basic"
                else {"mode": mode, "final_conversion_delta": "0.0005"},
                "organisation_id": org,
            },
        )["id"]
        for i, mode in enumerate(modes)
    ]
    _post(client, f"/v1/organisations/{org}/cap", {**CAP, "accounting": cap}, method="PATCH")
    count = 0
    single = len(steps) == 1  # spread over the datasets, round robin
    while count < limit:
        for index, mechanism in steps:
            target = datasets[count % len(datasets)] if single else datasets[index]
            r = client.post(
                f"/v1/datasets/{target}/invocations",
                json={"mechanism": mechanism},
                headers=AUTH,
            )
            if r.status_code == 422:
                return "422"
            if r.status_code != 201:
                if r.json().get("level") != "organisation":
                    raise RuntimeError(f"refused below the cap: {r.text}")
                return str(count)
            if single:
                count += 1
        if not single:
            count += 1
    return f"≥ {count}"


def one_dataset(workload: str) -> str:
    """What one dataset of the cap's budget admits of the workload's mechanism, by the core."""
    modes, steps = WORKLOADS[workload]
    if len({m for m in modes}) != 1:
        return "—"
    mode, mechanism = modes[0], steps[0][1]
    accounting: dict[str, Any] = {"mode": mode}
    if mechanism is DPSGD:
        accounting["workload"] = WORKLOAD
    config = make_config(CAP["epsilon"], CAP["delta"], "add_remove", accounting)
    found = capacity(config, initial_state(config), parse_declaration(mechanism))
    label = "workload-aware " if mechanism is DPSGD else ""
    return f"{found.count} ({label}{mode})"


def table(limit: int) -> str:
    rows = []
    with service() as client:
        for workload in WORKLOADS:
            cells = [admitted(client, cap, workload, limit) for cap in CAPS.values()]
            rows.append(f"| {workload} | " + " | ".join(cells) + f" | {one_dataset(workload)} |")
    head = "| workload (cap (10, 1e-5)) | " + " | ".join(CAPS) + " | one dataset of (10, 1e-5) |"
    rule = "|---" * (len(CAPS) + 2) + "|"
    return "\n".join([head, rule, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks caps", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--limit", type=int, default=5000, help="stop counting at this many")
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args(argv)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = table(args.limit)
    block = "\n".join(
        [
            BEGIN,
            "## Organisation caps in every currency",
            "",
            f"`python -m benchmarks caps` — {started}, Python {platform.python_version()}, "
            "SQLite, the service in process. Admitted invocations (complete rounds for the "
            "mixed workload) until the organisation cap refuses; curve caps keep 1 % of δ for "
            "approximate declarations; 422: the cap's mode cannot account the workload.",
            "",
            body,
            END,
        ]
    )
    print(block)
    if not args.no_results:
        write_section(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
