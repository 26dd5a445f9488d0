"""SQLite's write gate: writers of every process take an exclusive ``flock`` beside the
database before ``BEGIN IMMEDIATE`` (:class:`app.db.uow.WriteGate`).

Shown able to fail: with the gate taking only its process's lock (no ``flock``), the first test
failed: no lock file, and the other process's writer did not hold anything."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.db.uow import WriteGate

_HOLD = """
import sys, time
from app.db.uow import WriteGate
gate = WriteGate.for_database(sys.argv[1])
gate.acquire()
print("held", flush=True)
sys.stdin.readline()
gate.release()
print("released", flush=True)
sys.stdin.readline()
"""


def _free(lock_file: Path) -> bool:
    fd = os.open(lock_file, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return True


def test_a_writer_of_another_process_holds_the_gate(tmp_path: Path) -> None:
    database = tmp_path / "odometer.db"
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(database)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        _take_turns_with(holder, tmp_path, database)


def _take_turns_with(holder: subprocess.Popen[str], tmp_path: Path, database: Path) -> None:
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "held"
        lock_file = tmp_path / "odometer.db-writer.lock"
        assert not _free(lock_file)
        # a writer of this process waits until the other process leaves
        gate = WriteGate.for_database(str(database))
        entered = threading.Event()

        def write() -> None:
            gate.acquire()
            entered.set()
            gate.release()

        writer = threading.Thread(target=write)
        writer.start()
        assert not entered.wait(0.3)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        assert entered.wait(5)
        writer.join(5)
        assert _free(lock_file)
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(5)


def test_writers_of_one_process_take_turns(tmp_path: Path) -> None:
    gate = WriteGate.for_database(str(tmp_path / "x.db"))
    inside: list[str] = []
    seen_together: list[int] = []  # how many writers were inside at each entry
    order: list[str] = []

    def write(name: str) -> None:
        gate.acquire()
        try:
            inside.append(name)
            seen_together.append(len(inside))
            time.sleep(0.002)  # long enough for a second writer to get in, were it let
            order.append(name)
            inside.pop()
        finally:
            gate.release()

    threads = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(order) == [f"w{i}" for i in range(8)]
    assert seen_together == [1] * 8


@pytest.mark.parametrize("database", [None, "", ":memory:"])
def test_a_database_without_a_file_gates_threads_only(database: str | None) -> None:
    gate = WriteGate.for_database(database)
    gate.acquire()
    gate.release()
    assert gate._path is None
