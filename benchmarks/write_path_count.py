"""Instructions per registration, counted: the write path's probes under callgrind.

CPU times on a shared machine move by tens of percent from one run to the next; the number of
user-space instructions a registration executes hardly moves. This runs
:mod:`benchmarks.write_path_probe` (``service``: ``register_invocation`` in process; ``edge``:
the same request through the app's ASGI interface) under ``valgrind --tool=callgrind
--instr-atstart=no``, the probe switching the instrumentation on after its warm-up and off
after its loop (``ODOMETER_PROBE_CALLGRIND=1``), and prints the instructions per registration
of each build, each on a SQLite database its own migrations made, with and without a
checkpoint key (``ODOMETER_CHECKPOINT_KEY``: every 201 carries a signed receipt where the
build gives one)::

    .venv/bin/python -m benchmarks write-path-count --build c800ecf --build now=. \\
        --probe service --probe edge --key no --key yes --count 300

Each ``--build`` is ``[LABEL=]SPEC`` as ``compare`` takes it: a directory holding a checkout
(``.``, uncommitted changes included) or a git ref of this repository, whose tree is ``git
archive``d under ``--workdir``; without ``--build``, this checkout. It prints one JSON line per
count and writes nothing to ``RESULTS.md``. (``python -m benchmarks.write_path_count`` runs it
too.) Needs valgrind (Debian's ``valgrind``, which brings ``callgrind_control``).

The kernel's share (the WAL commit's ``fsync``) is left out, the same in every build. Counts
include the probe's loop and one ``callgrind_control`` call, the same in every build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.compare import resolve
from benchmarks.results import checkout_path
from benchmarks.service_setup import migrate

PROBE = Path(__file__).with_name("write_path_probe.py")
ROOT = PROBE.parent.parent


def count(checkout: Path, probe: str, keyed: bool, registrations: int, workdir: Path) -> int:
    """User-space instructions per registration of ``checkout``'s ``probe`` (``keyed``: a
    checkpoint key given), on a freshly migrated SQLite database in ``workdir``."""
    fd, name = tempfile.mkstemp(suffix=".db", dir=workdir)
    os.close(fd)
    os.unlink(name)
    url = f"sqlite:///{name}"
    migrate(url, checkout)
    env = {**os.environ, "PYTHONPATH": checkout_path(checkout), "ODOMETER_PROBE_CALLGRIND": "1"}
    env.pop("ODOMETER_DATABASE_URL", None)
    env.pop("ODOMETER_CHECKPOINT_KEY", None)
    if keyed:
        from odometer_core.ledger.checkpoints import generate_key_pem

        key = workdir / "checkpoint-key.pem"
        if not key.exists():
            key.write_bytes(generate_key_pem()[0])
            key.chmod(0o600)
        env["ODOMETER_CHECKPOINT_KEY"] = str(key)
    out = workdir / f"callgrind.{probe}.{int(keyed)}.{os.getpid()}.{Path(name).stem}"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-P",
            str(PROBE),
            probe,
            url,
            str(registrations),
            "1" if probe == "group" else "0",
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    totals = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
    if totals is None:
        raise SystemExit(f"write_path_count: no totals in {out}")
    return int(totals.group(1)) // registrations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--build",
        action="append",
        help="[LABEL=]DIR or [LABEL=]GIT-REF (repeatable; default: this checkout, as 'this')",
    )
    parser.add_argument("--probe", action="append", choices=["service", "edge"])
    parser.add_argument("--key", action="append", choices=["no", "yes"])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the databases, callgrind's files and git refs' trees stay (default: a "
        "temporary directory, removed)",
    )
    args = parser.parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return run(args, args.workdir)
    with tempfile.TemporaryDirectory(prefix="write-path-count-") as workdir:
        return run(args, Path(workdir))


def run(args: argparse.Namespace, workdir: Path) -> int:
    """Every build's counts, its databases, callgrind's files and git refs' trees in
    ``workdir``."""
    scratch = workdir / "builds"  # git refs' trees
    scratch.mkdir(exist_ok=True)
    builds = [resolve(spec, scratch) for spec in args.build or [f"this={ROOT}"]]
    for build in builds:
        for probe in args.probe or ["service"]:
            for key in args.key or ["no"]:
                n = count(build.root, probe, key == "yes", args.count, workdir)
                row = {"build": build.label, "probe": probe, "key": key, "instructions": n}
                print(json.dumps(row))
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
