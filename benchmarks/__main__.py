"""The benchmarks' one entry point: ``python -m benchmarks NAME [ARGS…]``.

``python -m benchmarks`` alone lists them, one line each; ``python -m benchmarks NAME --help``
gives a benchmark's options. Each is also a make target (``make bench-NAME BENCH_ARGS=…``) and
has a smoke test in ``tests/benchmarks/``. Every benchmark writes its section of
``benchmarks/RESULTS.md`` unless told not to (``--no-results`` or ``--no-write``), except
``write-path-count``, ``prepare-threshold`` and ``compare``, which only print. Every one is in
the table of ``docs/development.md`` (*Benchmarks*).

The other modules of the package are the benchmarks' parts (the load generator, the server
plumbing, the bare HTTP floor app, ledger generation, the subprocess probes), not benchmarks.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    module: str  # under ``benchmarks``; imported only when the benchmark runs
    question: str  # what it answers, one line

    def main(self) -> Callable[[list[str] | None], int]:
        main: Callable[[list[str] | None], int] = importlib.import_module(
            f"benchmarks.{self.module}"
        ).main
        return main


#: name → benchmark; the name is also the make target's (``bench-NAME``) and its section's.
BENCHMARKS: dict[str, Benchmark] = {
    "accounting": Benchmark(
        "accounting",
        "admit() latency per mode vs history, subsampled-Gaussian RDP speed, tightness "
        "against dp_accounting",
    ),
    "grids": Benchmark(
        "grids", "what rdp mode admits with its default and workload-aware order grids"
    ),
    "blocks": Benchmark(
        "blocks",
        "what deciding a selection of 10^6 blocks costs in the core (partitioned datasets)",
    ),
    "caps": Benchmark(
        "caps", "what an organisation cap admits in each currency, today's basic cap beside it"
    ),
    "capacity": Benchmark(
        "capacity",
        "how many more of a declaration fit: the search beside the loop of admit(), up to 10^6",
    ),
    "ladder": Benchmark(
        "ladder", "what anchoring a filter's ladder at creation costs, what budget changes buy"
    ),
    "quote": Benchmark(
        "quote",
        "certified readings beside dp_accounting's PLD and RDP and the exact ε (DP-SGD, Gaussians)",
    ),
    "worst-case": Benchmark(
        "worst_case", "CPU time of one admission decision on adversarial declarations"
    ),
    "proofs": Benchmark(
        "proofs",
        "a 10^6-entry ledger's inclusion and consistency proofs: served time, bytes, the build",
    ),
    "ledger-verify": Benchmark(
        "ledger_verify",
        "export of a 10^6-entry ledger and its offline verification, in bounded memory",
    ),
    "service": Benchmark(
        "service",
        "the service's throughput, p50/p99, CPU per request beside the raw database; ledger growth",
    ),
    "http-floor": Benchmark(
        "http_floor",
        "raw transaction vs the same behind bare uvicorn vs the service (--compare: another build)",
    ),
    "write-path": Benchmark(
        "write_path",
        "CPU per registration in process, by build (--compare) and group size; group commit",
    ),
    "write-path-count": Benchmark(
        "write_path_count",
        "user-space instructions per registration under callgrind, by build, with and without "
        "a checkpoint key",
    ),
    "witness": Benchmark(
        "witness",
        "the witness's cost on the write path: none, lag 0 and lag 1 s (--before: another build)",
    ),
    "read-replica": Benchmark(
        "read_replica",
        "registrations/s beside a 10^5-entry export and 20 dashboards: none, on a replica, on "
        "the primary",
    ),
    "prepare-threshold": Benchmark(
        "prepare_threshold",
        "what turning psycopg's prepared statements off costs a registration on PostgreSQL "
        "(CPU, rate)",
    ),
    "compare": Benchmark(
        "compare",
        "two builds (git refs or checkouts) side by side: throughput and CPU per request, "
        "rounds interleaved",
    ),
}


def listing() -> str:
    width = max(map(len, BENCHMARKS))
    lines = ["usage: python -m benchmarks NAME [ARGS…]   (NAME --help for its options)", ""]
    lines += [f"  {name:<{width}}  {b.question}" for name, b in BENCHMARKS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    name, rest = args[0], args[1:]
    benchmark = BENCHMARKS.get(name) or BENCHMARKS.get(name.replace("_", "-"))
    if benchmark is None:
        print(f"unknown benchmark {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    sys.argv = [f"python -m benchmarks {name}", *rest]  # argparse's usage line names the entry
    return benchmark.main()(rest)


if __name__ == "__main__":
    raise SystemExit(main())
