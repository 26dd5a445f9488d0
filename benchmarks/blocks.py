"""What deciding a selection of blocks costs in the core, with 10⁶ blocks.

A partitioned dataset of 10⁶ blocks (daily or bucket blocks) in the core's interval map
(``odometer_core.accounting.blocks``), per mode (``basic`` pure ε = 0.001, ``rdp`` Gaussians
σ = 50): the time of 1,000 charges over random ranges (1 … 10⁵ blocks) and the runs they leave,
then the decision on 10⁴ contiguous blocks (p50 over 20 random places) and on all 10⁶ blocks.
The decision is made once per distinct history, so it costs what the number of runs says, not
the number of blocks. This is the core alone: no HTTP, no database (the service's figures come
when partitioned datasets are served).

Run from the repository root:

    .venv/bin/python -m benchmarks blocks

Writes the section between the ``blocks`` markers of ``benchmarks/RESULTS.md`` and prints it
(``--no-results``: print only; ``--blocks N --charges K`` for a smaller run).
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from datetime import UTC, datetime

from benchmarks.results import write_section
from odometer_core.accounting import initial_state, make_config, parse_declaration
from odometer_core.accounting.blocks import Blocks, decide_selection

BEGIN, END = "<!-- blocks:begin -->", "<!-- blocks:end -->"
WORKLOADS = {
    "basic": {"type": "pure_dp", "epsilon": "0.001"},
    "rdp": {"type": "gaussian", "sigma": "50", "sensitivity": "1"},
}


def run(mode: str, blocks: int, charges: int, seed: int = 1) -> dict[str, float]:
    config = make_config("10", "0.00001", "add_remove", {"mode": mode})
    declaration = parse_declaration(WORKLOADS[mode])
    state = Blocks().open(0, blocks, initial_state(config))
    rng = random.Random(seed)
    started = time.perf_counter()
    for _ in range(charges):
        lo = rng.randrange(0, blocks)
        hi = min(blocks, lo + rng.randrange(1, max(2, blocks // 10)))
        decided = decide_selection(config, state, [(lo, hi)], declaration)
        if not decided.admitted:
            raise RuntimeError(f"a charge was refused: {decided.refused[0].decision.reason}")
        state = decided.blocks
    history = time.perf_counter() - started
    span = min(10**4, blocks)
    times = []
    for _ in range(20):
        lo = rng.randrange(0, blocks - span + 1)
        at = time.perf_counter()
        decide_selection(config, state, [(lo, lo + span)], declaration)
        times.append(time.perf_counter() - at)
    at = time.perf_counter()
    everything = decide_selection(config, state, [(0, blocks)], declaration)
    whole = time.perf_counter() - at
    if not everything.admitted:
        raise RuntimeError("the charge over every block was refused")
    return {
        "runs": len(state.runs),
        "history_s": history,
        "span": span,
        "span_p50_ms": statistics.median(times) * 1000,
        "all_ms": whole * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks blocks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--blocks", type=int, default=10**6)
    parser.add_argument("--charges", type=int, default=1000)
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args(argv)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    for mode in WORKLOADS:
        r = run(mode, args.blocks, args.charges)
        rows.append(
            f"| `{mode}` | {args.blocks:,} | {args.charges:,} | {r['runs']:,.0f} | "
            f"{r['history_s']:.2f} s | {r['span_p50_ms']:.2f} ms ({r['span']:,.0f} blocks) | "
            f"{r['all_ms']:.1f} ms |"
        )
    block = "\n".join(
        [
            BEGIN,
            "## Partitioned datasets: a selection of blocks decided in the core",
            "",
            f"`python -m benchmarks blocks` — {started}, Python {platform.python_version()}, "
            f"{platform.machine()}; the core alone (no HTTP, no database). Charges over random "
            "ranges of 1 … blocks/10 blocks, then one charge over a contiguous span (p50 of "
            "20) and one over every block; each decision is made once per distinct history.",
            "",
            "| mode | blocks | random-range charges | runs after them | their time | "
            "p50 of one span | all blocks |",
            "|---|---|---|---|---|---|---|",
            *rows,
            END,
        ]
    )
    print(block)
    if not args.no_results:
        write_section(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
