"""``python -m benchmarks read-replica``'s parts that need no cluster: the summary of its windows
and its table, and the CPU count of a process tree (the whole run, a primary and a standby and
three servers, is the benchmark itself: ``make bench-read-replica``)."""

from __future__ import annotations

import os
import time

import pytest

from benchmarks.read_replica import Window, cluster_cpu, summary, table


def test_the_summary_takes_each_conditions_median_beside_no_reads() -> None:
    windows = [
        Window("none", 1000, 0, 10.0, 2.0),
        Window("none", 1200, 0, 10.0, 2.4),
        Window("none", 1100, 0, 10.0, 2.2),
        Window("replica", 1045, 0, 10.0, 2.1, {"exports": 3, "polls": 40}),
        Window("replica", 990, 0, 10.0, 2.0, {"exports": 2, "polls": 40}),
        Window("replica", 1100, 1, 10.0, 2.2, {"exports": 3, "polls": 40}),
        Window("primary", 800, 0, 10.0, 3.0, {"exports": 1, "polls": 40}),
    ]
    rows = summary(windows)
    assert rows["none"]["rate"] == 110.0
    assert rows["replica"]["rate"] == 104.5
    assert rows["replica"]["vs_none"] == pytest.approx(0.95)
    assert rows["replica"]["cpu_ms"] == pytest.approx(2100 / 1045)  # the median of three
    assert rows["replica"]["exports"] == 8 and rows["replica"]["failed"] == 1
    assert rows["primary"]["cpu"] == pytest.approx(0.3)
    lines = table(rows).splitlines()
    assert lines[2] == "| none | 110.0 | +0.0 % | 0.22 | 2.00 | 0 | 0 | 0 |"
    assert lines[3] == "| on the replica | 104.5 | -5.0 % | 0.21 | 2.01 | 8 | 120 | 1 |"
    assert lines[4] == "| on the primary | 80.0 | -27.3 % | 0.30 | 3.75 | 1 | 40 | 0 |"


def test_the_cpu_of_a_process_tree_grows_with_its_work() -> None:
    before = cluster_cpu(os.getpid())
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert cluster_cpu(os.getpid()) - before >= 0.15
