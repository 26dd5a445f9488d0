"""The fragmenting attack on a partitioned dataset, over HTTP to a one-worker server, on each
database given (``python -m benchmarks blocks --attack URL …``).

An analyst registers ``--registrations`` selections of ``--keys`` random bucket keys (ε = 10⁻⁶
each, almost nothing of the budget) on a dataset of ``--buckets`` buckets: each key cuts the
runs of equal history, so the dataset ends with about two runs per key ever selected. Beside it,
an unfragmented dataset of the same shape gets as many registrations of as many keys, each one
contiguous range (a run or two per registration). Then, on each dataset, interleaved, the same
requests are timed (wall time at the client and the server process's CPU, p50 of ``--repeat``):

- a registration of ``--keys`` random keys;
- a registration of two keys, the first and the last bucket;
- a page of the per-block status (``GET …/blocks``, its default 100 runs);
- the dataset's report (``GET …/report``: every entry's hash re-checked, the entries added
  since the last report of this process re-run), and apart, the first report of each dataset
  (which resumes from the position the background verification reached, where it verified
  the dataset: ``app/services/verify_behind.py``, on by default), and the first after the
  server is restarted (resumed from the position stored in the database: the server runs with
  a checkpoint key, as ``make run`` starts it).

Each request is timed ``--repeat`` times (one more round first, whose report is the *first*).

On PostgreSQL the tables are analysed after the attack (``VACUUM ANALYZE``: this machine's
cluster runs without autovacuum, which would do it in production). Targets: each within 5× of
the same request on the unfragmented dataset, and ≤ 1 s of server time. Writes the section
between the ``blocks-fragmented`` markers of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from odometer_core.ledger.checkpoints import generate_key_pem

BEGIN, END = "<!-- blocks-fragmented:begin -->", "<!-- blocks-fragmented:end -->"
TINY = {"type": "pure_dp", "epsilon": "0.000001"}
#: the requests timed, in the order of the table
REQUESTS = ("keys", "ends", "page", "report", "first", "restart")
LABELS = {
    "keys": "{keys:,}-key registration",
    "ends": "two keys, both ends",
    "page": "block page (100 runs)",
    "report": "report (every hash re-checked, the entries since the last report re-run)",
    "first": "report, the dataset's first (re-runs what the background verification has not)",
    "restart": "report, the first after a server restart (resumed from the stored position)",
}


class Client:
    """One keep-alive connection to the server, and its CPU clock."""

    def __init__(self, server: Any) -> None:
        from benchmarks.service_setup import ADMIN_KEY

        self.server = server
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
        self.headers = {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        sent = None if body is None else json.dumps(body)
        self.conn.request(method, path, sent, self.headers)
        response = self.conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else None

    def timed(self, method: str, path: str, body: object = None) -> tuple[float, float, Any]:
        """The call's wall time and the server's CPU during it (seconds), and its body."""
        cpu = self.server.cpu_seconds()
        at = time.perf_counter()
        status, out = self.call(method, path, body)
        wall = time.perf_counter() - at
        cpu = self.server.cpu_seconds() - cpu
        if status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {str(out)[:300]}")
        return wall, cpu, out


def _dataset(client: Client, name: str, buckets: int) -> str:
    status, out = client.call(
        "POST",
        "/v1/datasets",
        {
            "name": name,
            "budget": {"epsilon": "1", "delta": "0.000001"},
            "accounting": {"mode": "basic"},
            "partition": {"kind": "bucket", "unit": "record", "buckets": buckets},
        },
    )
    if status != 201:
        raise RuntimeError(f"dataset not created: {status} {out}")
    ds = str(out["id"])
    status, out = client.call(
        "POST", f"/v1/datasets/{ds}/blocks", {"open": {"from": 0, "to": buckets - 1}}
    )
    if status != 200:
        raise RuntimeError(f"blocks not opened: {status} {out}")
    return ds


def _register(client: Client, ds: str, blocks: object) -> tuple[float, float]:
    wall, cpu, _ = client.timed(
        "POST", f"/v1/datasets/{ds}/invocations", {"mechanism": TINY, "blocks": blocks}
    )
    return wall, cpu


def attack(
    url: str, buckets: int, registrations: int, keys: int, repeat: int, seed: int = 1
) -> dict[str, Any]:
    """The attack and the side-by-side timings on the migrated database ``url``; then the
    server restarted and each dataset's first report timed."""
    from benchmarks.service_setup import running_server

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "checkpoint.pem"
        key.write_bytes(generate_key_pem()[0])
        env = {"ODOMETER_CHECKPOINT_KEY": str(key)}
        with running_server(url, Path(tmp) / "server.log", 1, env=env) as server:
            out = _rounds(Client(server), buckets, registrations, keys, repeat, rng, url)
        with running_server(url, Path(tmp) / "server.log", 1, env=env) as server:
            client = Client(server)
            for name, ds in out["ids"].items():
                wall, cpu, report = client.timed("GET", f"/v1/datasets/{ds}/report")
                if not report["verification"]["ok"]:
                    raise RuntimeError(f"the report's replay failed: {report['verification']}")
                out[f"restart_{name}"], out[f"restart_{name}_cpu"] = wall, cpu
            client.conn.close()
    del out["ids"]
    return out


def _rounds(
    client: Client,
    buckets: int,
    registrations: int,
    keys: int,
    repeat: int,
    rng: random.Random,
    url: str,
) -> dict[str, Any]:
    """The attack, then the interleaved rounds, on one server."""
    from benchmarks.blocks import vacuum

    def scattered() -> dict[str, list[int]]:
        return {"keys": sorted(rng.sample(range(buckets), keys))}

    def contiguous() -> dict[str, int]:
        lo = rng.randrange(0, buckets - keys)
        return {"from": lo, "to": lo + keys - 1}

    fixed = {"keys": sorted(rng.sample(range(buckets), keys))}
    names = ("frag", "plain", "same")
    ids = {name: _dataset(client, name, buckets) for name in names}
    started = time.perf_counter()
    last: tuple[float, float] = (0.0, 0.0)
    for _ in range(registrations):
        last = _register(client, ids["frag"], scattered())
        _register(client, ids["plain"], contiguous())
        _register(client, ids["same"], fixed)
    history = time.perf_counter() - started
    vacuum(url)  # this machine's cluster runs without autovacuum (benchmarks/blocks.py)
    runs = {
        name: client.call("GET", f"/v1/datasets/{ds}")[1]["status"]["blocks"]["runs"]
        for name, ds in ids.items()
    }
    times: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {r: [] for r in REQUESTS} for name in names
    }
    for round_ in range(repeat + 1):  # interleaved: each request on every dataset in turn
        for name, ds in ids.items():
            times[name]["keys"].append(_register(client, ds, scattered()))
        for name, ds in ids.items():
            times[name]["ends"].append(_register(client, ds, {"keys": [0, buckets - 1]}))
        for name, ds in ids.items():
            wall, cpu, page = client.timed("GET", f"/v1/datasets/{ds}/blocks")
            times[name]["page"].append((wall, cpu))
            if name == "frag" and len(page["runs"]) != 100:
                raise RuntimeError("the fragmented dataset's page is not full")
        for name, ds in ids.items():
            wall, cpu, report = client.timed("GET", f"/v1/datasets/{ds}/report")
            if not report["verification"]["ok"]:
                raise RuntimeError(f"the report's replay failed: {report['verification']}")
            times[name]["first" if round_ == 0 else "report"].append((wall, cpu))
    client.conn.close()

    out: dict[str, Any] = {"history_s": history, "last_attack": last, "ids": ids}
    for name in names:
        out[f"runs_{name}"] = runs[name]
        for request in REQUESTS[:-1]:
            for which, suffix in ((0, ""), (1, "_cpu")):
                out[f"{request}_{name}{suffix}"] = statistics.median(
                    t[which] for t in times[name][request]
                )
    return out


def rows(url: str, buckets: int, registrations: int, keys: int, repeat: int) -> list[str]:
    """The table's rows for ``url`` (its own database: dropped and created anew)."""
    from benchmarks.service_setup import migrate, pg_drop, pg_recreate

    postgres = url.startswith("postgresql")
    if postgres:
        pg_recreate(url)
    migrate(url)
    r = attack(url, buckets, registrations, keys, repeat)
    if postgres:
        pg_drop(url.replace("postgresql+psycopg://", "postgresql://"))
    backend = "PostgreSQL" if postgres else "SQLite"
    runs = f"{r['runs_frag']:,} / {r['runs_plain']:,} / {r['runs_same']:,}"
    out = []
    for request in REQUESTS:
        wall = [r[f"{request}_{name}"] for name in ("frag", "plain", "same")]
        cpu = [r[f"{request}_{name}_cpu"] for name in ("frag", "plain", "same")]
        ratio = wall[0] / wall[1] if wall[1] else float("inf")
        same = wall[0] / wall[2] if wall[2] else float("inf")
        met = ratio <= 5 and cpu[0] <= 1
        out.append(
            f"| {backend} | {runs} | {LABELS[request].format(keys=keys)} | "
            + " / ".join(f"{w * 1000:.1f}" for w in wall)
            + f" ms | **{ratio:.2f}×** | {same:.2f}× | "
            + " / ".join(f"{c * 1000:.0f}" for c in cpu)
            + f" ms | {'yes' if met else 'NO'} |"
        )
    wall_last, cpu_last = r["last_attack"]
    out.append(
        f"| {backend} | — | the attack: {registrations} × {keys:,} keys | "
        f"{r['history_s']:.1f} s on the three datasets (the attack's last: "
        f"{wall_last * 1000:.0f} ms) | — | — | the attack's last: {cpu_last * 1000:.0f} ms | — |"
    )
    return out


def section(
    urls: list[str], buckets: int, registrations: int, keys: int, repeat: int, started: str
) -> str:
    from benchmarks.service_setup import loadavg

    load_before = loadavg()
    table = [row for url in urls for row in rows(url, buckets, registrations, keys, repeat)]
    load_after = loadavg()
    return "\n".join(
        [
            BEGIN,
            "## Partitioned datasets: the fragmenting attack",
            "",
            f"`python -m benchmarks blocks --attack URL …` — {started}; {os.cpu_count()} CPUs "
            f"(`nproc`), load average {load_before:.2f} at the start, {load_after:.2f} at the "
            f"end (a shared machine: compare the rows with each other). {registrations} "
            f"registrations of {keys:,} random keys (ε = 10⁻⁶) on a dataset of {buckets:,} "
            f"buckets (*fragmented*), beside as many registrations of {keys:,} contiguous keys "
            "on an *unfragmented* dataset and as many of one same set of "
            f"{keys:,} random keys on a third (*same keys*: its ledger as large as the "
            "fragmented one's, its runs few); then each request on the three, interleaved, "
            f"over HTTP to a one-worker server (p50 of {repeat + 1} rounds, the report's of "
            f"the {repeat} after the first; the *first* report is the first round's, one "
            "sample; wall time at the client, the server process's CPU, in 10 ms ticks). Runs: "
            "after the attack. Target: within 5× of the unfragmented dataset and ≤ 1 s of "
            "server CPU.",
            "",
            "| database | runs: fragmented / unfragmented / same keys | request | "
            "wall: fragmented / unfragmented / same keys | × unfragmented | × same keys | "
            "server CPU: fragmented / unfragmented / same keys | target met |",
            "|---|---|---|---|---|---|---|---|",
            *table,
            END,
        ]
    )
