"""``python -m benchmarks read-replica``'s parts that need no cluster: the summary of its windows
and its table, and the CPU count of a process tree (the whole run, a primary and a standby and
three servers, is the benchmark itself: ``make bench-read-replica``)."""

from __future__ import annotations

import os
import time

import pytest

from benchmarks.read_replica import Window, busy, cluster_cpu, sides_table, summary, table

MB5 = 5_000_000


def test_the_summary_sets_each_round_beside_its_own_no_reads() -> None:
    windows = [  # round 1, then round 2: none, replica, primary each
        Window("none", 1000, 0, 10.0, 2.0),
        Window("replica", 950, 0, 10.0, 2.0, {"exports": 3, "polls": 40, "export_bytes": MB5}),
        Window("primary", 800, 0, 10.0, 3.0, {"exports": 1, "polls": 40}),
        Window("none", 1200, 0, 10.0, 2.4),
        Window("replica", 1200, 1, 10.0, 2.4, {"exports": 2, "polls": 40, "export_bytes": MB5}),
        Window("primary", 900, 0, 10.0, 2.8, {"polls": 40}),
    ]
    rows = summary(windows)
    assert rows["none"]["rate"] == 110.0
    assert rows["replica"]["rate"] == 107.5
    assert rows["replica"]["vs_none"] == pytest.approx(0.975)  # 0.95 and 1.0, not 107.5 / 110
    assert rows["primary"]["vs_none"] == pytest.approx(0.775)
    assert rows["replica"]["cpu_ms"] == pytest.approx((2000 / 950 + 2.0) / 2)
    # the primary's CPU per registration, each round beside its own no reads: 1000/950 and 1
    assert rows["replica"]["cpu_vs_none"] == pytest.approx((1000 / 950 + 1) / 2)
    assert rows["primary"]["cpu_vs_none"] == pytest.approx((3.0 / 0.8 / 2.0 + 2.8 / 0.9 / 2.0) / 2)
    lines = table(rows).splitlines()
    assert lines[2] == (
        "| none | 110.0 | +0.0 % (+0.0 … +0.0 %) | 0.22 | 2.00 | +0.0 % (+0.0 … +0.0 %) | 0 | 0 "
        "| 0 | 0 |"
    )
    assert lines[3] == (
        "| on the replica | 107.5 | -2.5 % (-5.0 … +0.0 %) | 0.22 | 2.05 | +2.6 % (+0.0 … +5.3 %) "
        "| 10 | 5 | 80 | 1 |"
    )
    assert lines[4] == (
        "| on the primary | 85.0 | -22.5 % (-25.0 … -20.0 %) | 0.29 | 3.43 | +71.5 % (+55.6 … "
        "+87.5 %) | 0 | 1 | 80 | 0 |"
    )


def test_the_cpu_of_a_process_tree_grows_with_its_work() -> None:
    before = cluster_cpu(os.getpid())
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert cluster_cpu(os.getpid()) - before >= 0.15


def test_the_write_sides_share_of_its_cpus_is_set_beside_no_reads() -> None:
    # the write side's own CPU falls while other work takes its CPUs: the registrations follow
    # the share, not the CPU per registration (issue 51's cause on a shared machine)
    windows = [  # round 1, then round 2: none, replica, primary each
        Window("none", 1000, 0, 10.0, 2.0, {}, 8.0, 2.0),
        Window("replica", 800, 0, 10.0, 1.6, {}, 6.4, 3.6),
        Window("primary", 900, 0, 10.0, 2.7, {}, 9.0, 1.0),
        Window("none", 1200, 0, 10.0, 2.4, {}, 9.6, 0.4),
        Window("replica", 1200, 0, 10.0, 2.4, {}, 10.2, 0.0),
        Window("primary", 1000, 0, 10.0, 3.0, {}, 10.0, 0.0),
    ]
    rows = summary(windows)
    assert rows["replica"]["write_cpu"] == pytest.approx((0.64 + 1.02) / 2)
    assert rows["replica"]["other_cpu"] == pytest.approx(0.18)
    assert rows["replica"]["share_vs_none"] == pytest.approx((0.8 + 1.0625) / 2)
    assert rows["replica"]["write_vs_none"] == pytest.approx((1.0 + 1.0625) / 2)
    lines = sides_table(rows).splitlines()
    assert (
        lines[2]
        == "| none | 0.88 | +0.0 % (+0.0 … +0.0 %) | 0.12 | 8.00 | +0.0 % (+0.0 … +0.0 %) |"
    )
    assert lines[3] == (
        "| on the replica | 0.83 | -6.9 % (-20.0 … +6.2 %) | 0.18 | 8.25 | +3.1 % (+0.0 … +6.2 %) |"
    )


def test_busy_counts_the_time_a_cpu_ran_anything() -> None:
    mine = os.sched_getaffinity(0)
    before, began = busy(mine), time.monotonic()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    assert busy(mine) - before >= 0.25
    assert busy(mine) - before <= (time.monotonic() - began) * len(mine) + 0.05
