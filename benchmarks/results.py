"""``benchmarks/RESULTS.md``: each benchmark owns one section between its two markers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(block: str, path: Path = RESULTS) -> None:
    """Replace a benchmark's section: ``block`` runs from its begin marker (first line) to its
    end marker (last line); the section is appended when the file lacks it, and the other
    benchmarks' sections are left as they are."""
    lines = block.strip("\n").split("\n")
    begin, end = lines[0], lines[-1]
    if not (begin.startswith("<!-- ") and end.startswith("<!-- ") and len(lines) > 1):
        raise ValueError("a section starts and ends with its markers")
    old = path.read_text("utf-8") if path.exists() else "# Benchmark results\n"
    new_block = "\n".join(lines)
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + new_block + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + new_block + "\n"
    path.write_text(new, "utf-8")


def commit_of(checkout: Path, fmt: str = "%h") -> str | None:
    """``git log -1 --format=fmt`` of a checkout (``None`` when it is not a git checkout)."""
    out = subprocess.run(
        ["git", "-C", str(checkout), "log", "-1", f"--format={fmt}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return out or None


def has_core(checkout: Path) -> bool:
    """Whether ``checkout`` has the ``core`` distribution (the accounting core and ledger
    format, ``odometer_core``); a checkout from before it was split out keeps its accounting
    under ``app``."""
    return (checkout / "core" / "odometer_core").is_dir()


def checkout_path(checkout: Path) -> str:
    """``PYTHONPATH`` that runs ``checkout``'s own code: its ``core`` (:func:`has_core`) ahead
    of the copy installed in the environment, which is this checkout's, then the checkout
    itself (``app``)."""
    return f"{checkout / 'core'}{os.pathsep}{checkout}" if has_core(checkout) else str(checkout)


def package_version(distribution: str) -> str:
    """The installed version of ``distribution`` (``dp_accounting`` or ``dp-accounting``), for
    the results' machine line; ``?`` when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution.replace("_", "-"))
    except PackageNotFoundError:
        return "?"
