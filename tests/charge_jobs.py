"""Jobs for the charge-worker tests (importable by a freshly spawned worker process)."""

from __future__ import annotations

import time


def table(value: int) -> dict[object, object]:
    """A memo table, at once."""
    return {("job", (value,)): value * 2}


def burn(seconds: float) -> dict[object, object]:
    """Spend ``seconds`` of CPU in Python (a CPU timer can interrupt it)."""
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        n += 1
    return {("burn", (seconds,)): n}


def stall(seconds: float) -> dict[object, object]:
    """Wait without using CPU (only the wall-clock deadline can end it)."""
    time.sleep(seconds)
    return {}


def fail() -> dict[object, object]:
    raise RuntimeError("a job that fails")
