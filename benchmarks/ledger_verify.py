"""Export + offline verification of a long ledger, in bounded memory.

    .venv/bin/python -m benchmarks.ledger_verify [--entries 1000000] [--no-write]

1. Streams ``--entries`` entries from :mod:`benchmarks.ledger_gen` (the service's entry
   construction, no HTTP / database) into a JSON-lines export (``odometer export --format
   jsonl`` encoding) in a temporary directory.
2. Runs ``odometer verify EXPORT`` (``python -m app.cli verify``) as a subprocess under
   ``/usr/bin/time -v`` (peak RSS) or, without it, ``getrusage(RUSAGE_CHILDREN)``.
3. Writes the numbers between ``<!-- ledger-verify:begin -->`` / ``<!-- ledger-verify:end -->``
   in ``benchmarks/RESULTS.md`` (other sections are left alone).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.ledger_gen import generate, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
BEGIN, END = "<!-- ledger-verify:begin -->", "<!-- ledger-verify:end -->"


def _verify(path: Path) -> tuple[float, int, int, dict[str, object]]:
    """(wall seconds, peak RSS KiB, exit code, verdict) of ``odometer verify path``."""
    command = [sys.executable, "-m", "app.cli", "verify", str(path)]
    time_bin = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    if time_bin:
        command = [time_bin, "-v", *command]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - start
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    peak = int(match.group(1)) if match else resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    verdict: dict[str, object] = json.loads(done.stdout) if done.stdout.strip() else {}
    return wall, peak, done.returncode, verdict


def _write(section: str) -> None:
    text = RESULTS.read_text("utf-8") if RESULTS.exists() else "# Benchmark results\n"
    block = f"{BEGIN}\n{section.rstrip()}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text, "utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print, do not update RESULTS")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        start = time.perf_counter()
        with path.open("w", encoding="utf-8") as out:
            written = write_jsonl(generate(args.entries, args.seed), out)
        generation = time.perf_counter() - start
        size = path.stat().st_size
        wall, peak_kib, code, verdict = _verify(path)
    ok = code == 0 and verdict.get("ok") is True and verdict.get("entries") == written
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = f"""## Ledger export + offline verification

Run {now} on {platform.machine()}, CPython {platform.python_version()}, {os.cpu_count()} CPU(s).
Command: `.venv/bin/python -m benchmarks.ledger_verify --entries {args.entries}`.

A JSON-lines export of {written:,} entries ({size / 1e6:,.0f} MB; mixed history from
`benchmarks/ledger_gen.py`: accepted, reserved → settled / cancelled, rejected, budget
changes) is streamed to disk, then `odometer verify EXPORT` (hash chain + full replay through
the accounting core) runs as a subprocess; peak RSS is the subprocess's
(`/usr/bin/time -v`).

| step | wall time (s) | entries/s | peak RSS (MiB) |
|---|---|---|---|
| generate + write export (streamed) | {generation:.1f} | {written / generation:,.0f} | – |
| `odometer verify` (chain + replay, streamed) | {wall:.1f} | {written / wall:,.0f} \
| {peak_kib / 1024:.0f} |

Verdict: ok = {verdict.get("ok")}, entries = {verdict.get("entries")}, exit code {code}.
Target for verify: under 60 s — {"met" if wall < 60 else "NOT met"} ({wall:.1f} s).
"""
    print(section)
    if not args.no_write:
        _write(section)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
