"""``python -m benchmarks read-replica``: do heavy reads leave the primary's registrations alone
once a streaming replica serves them (``ODOMETER_READ_DATABASE_URL``, ``app/services/reads.py``)?

Set-up: a throw-away primary and its asynchronous streaming standby (``hot_standby_feedback``
on, so a long read on the standby never holds replay back nor is cancelled by it), built from
the installed PostgreSQL binaries as the failover tests build them; one dataset prefilled with
``--entries`` ledger entries (``COPY``, as ``benchmarks/service_growth.py`` does) and
``--datasets`` datasets that take the registrations. Three servers: the *writer* (2 workers,
the primary only) takes every registration; the *replica reader* (1 worker, reads on the
standby) and the *primary reader* (1 worker, no read URL: every read on the primary) take
the reads.

Each window of ``--seconds``: ``--clients`` clients register pure-DP charges on the datasets
(round robin, one connection each, back to back) through the writer, and, by condition,

- ``none``: nothing else;
- ``replica``: an auditor downloads the prefilled ledger's whole export back to back, and
  ``--dashboards`` dashboards poll its status every ``--poll`` seconds (with
  ``Odometer-Min-Seq``, as the dashboard does), through the replica reader;
- ``primary``: the same reads through the primary reader.

The primary, the writer and the registering clients are pinned to one half of the CPUs, the
standby, both readers and the reading clients to the other (``--no-pin``: every process on every
CPU), so that what the reads cost the primary is told apart from what they cost the machine. The
reading clients run in a session of their own, as the servers and the clusters do (the kernel's
autogroup scheduler weighs a session's processes together, so that otherwise the reading clients
would share the registering clients' weight; in 4 interleaved rounds this moved the reads' cost
by about a point, −23 % in the session, −22 % in one of their own). ``--priority N`` runs the
write side at nice ``N`` (its sessions' autogroups, or its processes where autogroup is off):
pinning keeps the write side off the read side's CPUs but does not keep other work off the write
side's, and on a machine shared with other work that work moves to the write side's CPUs
whenever the read side fills its own; a negative ``N`` keeps that work from taking them while
the write side can run (it still fills the write side's waits, a commit's fsync among them),
which tells the reads' own cost from the machine's. The conditions are interleaved, round after
round (``--rounds``), so that the machine's other load falls on each alike. Measured per window:
registrations per second, the CPU seconds the primary's PostgreSQL processes used (the
postmaster, its live backends and its exited children), those the whole write side used (the
primary, the writer server, the registering clients) and those everything else used on the write
side's CPUs (``/proc/stat``'s busy time of those CPUs less the write side's); the answer is each
condition's median over the rounds, and the median of its rate beside the same round's ``none``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import platform
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory, gettempdir
from typing import Any

from benchmarks.results import write_section
from benchmarks.service_growth import prefill_postgres
from benchmarks.service_setup import ADMIN_KEY, call, create_dataset, migrate, running_server

DATABASE = "odometer_bench_reads"
BIG = "ds_bench_reads_big"
CONDITIONS = ("none", "replica", "primary")
BEGIN, END = "<!-- read-replica:begin -->", "<!-- read-replica:end -->"
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
PURE = json.dumps({"mechanism": {"type": "pure_dp", "epsilon": "0.000001"}}).encode()


# ---------------------------------------------------------------------------- CPU of a cluster
def _ticks(pid: int) -> tuple[int, int]:
    """(own utime + stime, exited children's cutime + cstime) of ``pid``, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def cluster_cpu(postmaster: int) -> float:
    """CPU seconds a PostgreSQL cluster used so far: its postmaster, its live processes and
    those that exited (counted in the postmaster's children times)."""
    own, exited = _ticks(postmaster)
    total = own + exited
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == postmaster:
                total += int(stat[11]) + int(stat[12])
    return total / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children.get(current, []))
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds ``pid`` and the processes below it used so far (with their exited children)."""
    total = 0
    for each in descendants(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += sum(_ticks(each))
    return total / os.sysconf("SC_CLK_TCK")


def busy(cpus: set[int]) -> float:
    """CPU seconds ``cpus`` spent running anything so far (``/proc/stat``: all but idle, iowait
    and steal)."""
    total = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name[3:].isdigit() and int(name[3:]) in cpus:
            values = [int(t) for t in ticks[:8]]
            total += sum(values) - values[3] - values[4] - values[7]
    return total / os.sysconf("SC_CLK_TCK")


def prioritise(pid: int, nice: int) -> None:
    """Run ``pid``'s session (its autogroup) at ``nice``; where the kernel has no autogroups,
    ``pid`` and its processes (those they start later inherit it)."""
    group = Path(f"/proc/{pid}/autogroup")
    if group.exists():
        group.write_text(str(nice))
        return
    for each in descendants(pid):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, each, nice)


def pin(pid: int, cpus: set[int]) -> None:
    """Keep ``pid`` and its processes (and those they start later) on ``cpus``."""
    for each in descendants(pid):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(each, cpus)


def sides(pinned: bool) -> tuple[set[int], set[int]]:
    """The CPUs of the write side (the primary, the writer, the registering clients) and of the
    read side (the standby, the readers, the reading clients): each half of the machine's, or
    every CPU for both when not pinned."""
    every = sorted(os.sched_getaffinity(0))
    if not pinned or len(every) < 2:
        return set(every), set(every)
    half = len(every) // 2
    return set(every[:half]), set(every[half:])


# ---------------------------------------------------------------------------- loads
def _writes(
    port: int, datasets: list[str], seconds: float, index: int, out: Any, cpus: set[int],
    nice: int = 0,
) -> None:  # fmt: skip
    os.sched_setaffinity(0, cpus)
    if nice:  # a session of its own, so that its priority is not the benchmark's session's
        os.setsid()
        prioritise(os.getpid(), nice)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {**AUTH, "Content-Type": "application/json"}
    done = failed = 0
    end = time.monotonic() + seconds
    i = index
    while time.monotonic() < end:
        conn.request(
            "POST", f"/v1/datasets/{datasets[i % len(datasets)]}/invocations", PURE, headers
        )
        response = conn.getresponse()
        response.read()
        if response.status == 201:
            done += 1
        else:
            failed += 1
        i += 1
    conn.close()
    out.put((done, failed))


def _export_loop(port: int, stop: threading.Event, counts: dict[str, int]) -> None:
    while not stop.is_set():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("GET", f"/v1/datasets/{BIG}/ledger?export=true&format=jsonl", headers=AUTH)
        response = conn.getresponse()
        size = 0
        while chunk := response.read(1 << 16):
            size += len(chunk)
            if stop.is_set():
                break
        conn.close()
        counts["exports"] += 1 if not stop.is_set() else 0
        counts["export_bytes"] += size
        counts[f"source:{response.getheader('Odometer-Read-Source')}"] += 1


def _dashboard(port: int, poll: float, offset: float, stop: threading.Event, counts: Any) -> None:
    """A dashboard's live poll: its status every ``poll`` seconds, naming what it has shown; a
    connection each time (uvicorn closes a connection idle for 5 s, as a browser's would be)."""
    stop.wait(offset)
    shown = 0
    while not stop.is_set():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {**AUTH, "Odometer-Min-Seq": f"{BIG}:{shown}"}
        conn.request("GET", f"/v1/datasets/{BIG}", headers=headers)
        response = conn.getresponse()
        body = json.loads(response.read())
        conn.close()
        shown = max(shown, int(body["ledger"]["last_seq"]))
        counts["polls"] += 1
        stop.wait(poll)


def _reads(
    port: int, dashboards: int, poll: float, seconds: float, out: Any, cpus: set[int]
) -> None:
    os.setsid()  # not weighed with the registering clients (the benchmark's session)
    os.sched_setaffinity(0, cpus)
    stop = threading.Event()
    counts: dict[str, int] = {
        "exports": 0, "export_bytes": 0, "polls": 0, "source:replica": 0, "source:primary": 0
    }  # fmt: skip
    threads = [threading.Thread(target=_export_loop, args=(port, stop, counts))]
    threads += [
        threading.Thread(target=_dashboard, args=(port, poll, poll * i / dashboards, stop, counts))
        for i in range(dashboards)
    ]
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(120)
    out.put(counts)


@dataclass
class Window:
    condition: str
    registrations: int
    failed: int
    seconds: float
    primary_cpu: float
    reads: dict[str, int] = field(default_factory=dict)
    #: CPU seconds of the whole write side (primary, writer server, registering clients), and
    #: of everything else on the write side's CPUs
    write_cpu: float = 0.0
    other_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.registrations / self.seconds


def window(
    condition: str, ports: dict[str, int], datasets: list[str], args: argparse.Namespace,
    write_side: tuple[int, int], cpus: tuple[set[int], set[int]],
) -> Window:  # fmt: skip
    """One window of ``condition``; ``write_side``: the primary's postmaster and the writer
    server's process."""
    postmaster, writer = write_side
    ctx = multiprocessing.get_context("fork")
    queue: Any = ctx.Queue()
    readers = []
    if condition != "none":
        port = ports[condition]
        readers.append(
            ctx.Process(
                target=_reads,
                args=(port, args.dashboards, args.poll, args.seconds + 1, queue, cpus[1]),
            )
        )
        readers[0].start()
        time.sleep(1.0)  # the export under way before the window opens
    writers = [
        ctx.Process(
            target=_writes,
            args=(ports["writer"], datasets, args.seconds, i, queue, cpus[0], args.priority),
        )
        for i in range(args.clients)
    ]
    cpu0, serving0, busy0, clients0 = (
        cluster_cpu(postmaster),
        tree_cpu(writer),
        busy(cpus[0]),
        _reaped(),
    )
    began = time.monotonic()
    for p in writers:
        p.start()
    for p in writers:
        p.join()  # reaped: their CPU is in this process's children's times (the readers' not yet)
    seconds, cpu = time.monotonic() - began, cluster_cpu(postmaster) - cpu0
    write_cpu = cpu + tree_cpu(writer) - serving0 + _reaped() - clients0
    other_cpu = busy(cpus[0]) - busy0 - write_cpu
    results = [queue.get() for _ in range(len(writers) + len(readers))]
    for p in readers:
        p.join()
    done = sum(r[0] for r in results if isinstance(r, tuple))
    failed = sum(r[1] for r in results if isinstance(r, tuple))
    reads = next((r for r in results if isinstance(r, dict)), {})
    return Window(condition, done, failed, seconds, cpu, reads, write_cpu, other_cpu)


def _reaped() -> float:
    times = os.times()
    return times.children_user + times.children_system


# ---------------------------------------------------------------------------- the run
@contextlib.contextmanager
def replicated(entries: int) -> Iterator[tuple[Any, str, str]]:
    """The primary and its standby, the database migrated and the big ledger prefilled; the
    pair and both URLs."""
    from tests.reliability.replicated_postgres import remove_pair, start_replicated_pair

    pair = start_replicated_pair("async")
    try:
        pair.standby.query("ALTER SYSTEM SET hot_standby_feedback = on")
        pair.standby.query("SELECT pg_reload_conf()")
        pair.create_database(DATABASE)
        primary, standby = pair.primary.url(DATABASE), pair.standby.url(DATABASE)
        migrate(primary)
        began = time.monotonic()
        libpq = pair.primary.conninfo(DATABASE)
        cache = Path(gettempdir()) / f"odometer-bench-reads-{entries}.pickle"  # kept for reruns
        prefill_postgres(libpq, BIG, entries, cache)
        print(f"prefilled {entries:,} entries in {time.monotonic() - began:.1f} s", flush=True)
        began = time.monotonic()
        caught_up(pair)
        print(f"the standby replayed them in {time.monotonic() - began:.1f} s", flush=True)
        yield pair, primary, standby
    finally:
        for node in pair.nodes:
            with contextlib.suppress(Exception):
                node.kill_9()
        remove_pair(pair)


def caught_up(pair: Any, timeout: float = 1800) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    target = pair.primary.query("SELECT pg_current_wal_lsn()")[0][0]
    deadline = time.monotonic() + timeout
    while not pair.standby.query("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,))[0][0]:
        if time.monotonic() > deadline:
            raise RuntimeError("the standby did not catch up")
        time.sleep(0.5)


def run(args: argparse.Namespace) -> list[Window]:
    windows: list[Window] = []
    with TemporaryDirectory(prefix="odometer-bench-reads-") as tmp:
        workdir = Path(tmp)
        with (
            replicated(args.entries) as (pair, primary, standby),
            running_server(primary, workdir / "writer.log", 2, pool_connections=16) as writer,
            running_server(
                primary, workdir / "replica.log", 1, pool_connections=4,
                env={"ODOMETER_READ_DATABASE_URL": standby, "ODOMETER_READ_POOL_SIZE": "24"},
            ) as via_replica,
            running_server(primary, workdir / "primary.log", 1, pool_connections=24) as via_primary,
        ):  # fmt: skip
            ports = {
                "writer": writer.port,
                "replica": via_replica.port,
                "primary": via_primary.port,
            }
            datasets = [
                create_dataset(writer.port, f"reads-{i}", "basic") for i in range(args.datasets)
            ]
            status, _ = call(via_replica.port, "GET", f"/v1/datasets/{BIG}")
            assert status == 200, status
            postmaster = pair.primary.process.pid
            cpus = sides(args.pin)
            print(
                f"write side (the primary's PostgreSQL, the writer, the registering clients) on "
                f"CPUs {sorted(cpus[0])}; read side (the standby, both readers, the reading "
                f"clients) on CPUs {sorted(cpus[1])}; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            for pid, side in (
                (postmaster, 0), (writer.process.pid, 0), (pair.standby.process.pid, 1),
                (via_replica.process.pid, 1), (via_primary.process.pid, 1),
            ):  # fmt: skip
                pin(pid, cpus[side])
            if args.priority:
                for pid in (postmaster, writer.process.pid):
                    prioritise(pid, args.priority)
            write_side = (postmaster, writer.process.pid)
            window("none", ports, datasets, args, write_side, cpus)  # warm-up, not counted
            for r in range(args.rounds):
                order = CONDITIONS if r % 2 == 0 else tuple(reversed(CONDITIONS))
                for condition in order:
                    w = window(condition, ports, datasets, args, write_side, cpus)
                    windows.append(w)
                    print(
                        f"round {r + 1} {condition:>7}: {w.rate:7.1f} reg/s, primary CPU "
                        f"{w.primary_cpu / w.seconds:5.2f} s/s, write side "
                        f"{w.write_cpu / w.seconds:4.2f} s/s, others on its CPUs "
                        f"{w.other_cpu / w.seconds:4.2f} s/s, failed {w.failed}, reads "
                        f"{w.reads}",
                        flush=True,
                    )
    return windows


def summary(windows: list[Window]) -> dict[str, dict[str, float]]:
    """Each condition's median registrations/s and primary CPU per second, and its rate beside
    ``none``'s (``vs_none``: 1.0 = unchanged)."""
    out: dict[str, dict[str, float]] = {}
    for condition in CONDITIONS:
        mine = [w for w in windows if w.condition == condition]
        if not mine:
            continue
        out[condition] = {
            "rate": statistics.median(w.rate for w in mine),
            "cpu": statistics.median(w.primary_cpu / w.seconds for w in mine),
            "cpu_ms": statistics.median(
                1000 * w.primary_cpu / max(1, w.registrations) for w in mine
            ),
            "exports": sum(w.reads.get("exports", 0) for w in mine),
            "export_mb": sum(w.reads.get("export_bytes", 0) for w in mine) / 1e6,
            "polls": sum(w.reads.get("polls", 0) for w in mine),
            "failed": sum(w.failed for w in mine),
            "write_cpu": statistics.median(w.write_cpu / w.seconds for w in mine),
            "other_cpu": statistics.median(w.other_cpu / w.seconds for w in mine),
            "write_ms": statistics.median(
                1000 * w.write_cpu / max(1, w.registrations) for w in mine
            ),
        }
    # each round's rate and primary CPU per registration beside the same round's ``none`` (the
    # machine's drift falls on both): the medians of the per-round ratios
    by_round: dict[int, dict[str, Window]] = {}
    for i, w in enumerate(windows):
        by_round.setdefault(i // len(CONDITIONS), {})[w.condition] = w
    for condition, values in out.items():
        for key, measure in (
            ("vs", _rate), ("cpu_vs", _cpu_per_registration), ("share_vs", _write_share),
            ("write_vs", _write_per_registration),
        ):  # fmt: skip
            ratios = [
                measure(r[condition]) / measure(r["none"])
                for r in by_round.values()
                if condition in r and "none" in r and measure(r["none"]) > 0
            ]
            values[f"{key}_none"] = statistics.median(ratios) if ratios else float("nan")
            values[f"{key}_min"] = min(ratios) if ratios else float("nan")
            values[f"{key}_max"] = max(ratios) if ratios else float("nan")
    return out


def _rate(w: Window) -> float:
    return w.rate


def _cpu_per_registration(w: Window) -> float:
    return w.primary_cpu / max(1, w.registrations)


def _write_share(w: Window) -> float:
    return w.write_cpu / w.seconds


def _write_per_registration(w: Window) -> float:
    return w.write_cpu / max(1, w.registrations)


def sides_table(rows: dict[str, dict[str, float]]) -> str:
    """Where the write side's CPUs went: the write side's own CPU (its share of them) and its CPU
    per registration, each beside no reads, and what other work took of those CPUs."""
    lines = [
        "| reads | write side's CPU (s per s) | … beside no reads, same round (median, range) | "
        "other work on its CPUs (s per s) | write side's CPU per registration (ms) | … beside "
        "no reads, same round (median, range) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    names = {"none": "none", "replica": "on the replica", "primary": "on the primary"}
    for condition, v in rows.items():
        lines.append(
            f"| {names[condition]} | {v['write_cpu']:.2f} | {_change(v, 'share_vs')} | "
            f"{v['other_cpu']:.2f} | {v['write_ms']:.2f} | {_change(v, 'write_vs')} |"
        )
    return "\n".join(lines)


def table(rows: dict[str, dict[str, float]]) -> str:
    lines = [
        "| reads | registrations/s (median) | beside no reads, same round (median, range) | "
        "primary's PostgreSQL CPU (s per s) | … per registration (ms) | … beside no reads, "
        "same round (median, range) | export MB read | exports done | status polls | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = {"none": "none", "replica": "on the replica", "primary": "on the primary"}
    for condition, v in rows.items():
        lines.append(
            f"| {names[condition]} | {v['rate']:.1f} | {_change(v, 'vs')} | {v['cpu']:.2f} | "
            f"{v['cpu_ms']:.2f} | {_change(v, 'cpu_vs')} | {v['export_mb']:.0f} | "
            f"{int(v['exports'])} | {int(v['polls'])} | {int(v['failed'])} |"
        )
    return "\n".join(lines)


def _change(v: dict[str, float], key: str) -> str:
    """A median per-round ratio and its range, as a change in per cent."""
    return (
        f"{100 * (v[f'{key}_none'] - 1):+.1f} % ({100 * (v[f'{key}_min'] - 1):+.1f} … "
        f"{100 * (v[f'{key}_max'] - 1):+.1f} %)"
    )


def section(args: argparse.Namespace, rows: dict[str, dict[str, float]]) -> str:
    return "\n".join(
        [
            BEGIN,
            "## Read replica: heavy reads beside registrations",
            "",
            f"`python -m benchmarks read-replica --entries {args.entries} --rounds "
            f"{args.rounds} --seconds {args.seconds:g} --clients {args.clients} --datasets "
            f"{args.datasets} --dashboards {args.dashboards} --poll {args.poll:g}`, "
            f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores "
            "shared with other work; "
            + (
                f"the primary's PostgreSQL, the writer and the registering clients pinned to CPUs "
                f"{_cpus(sides(True)[0])}, the standby, the readers and the reading clients to "
                f"CPUs {_cpus(sides(True)[1])} (`sched_setaffinity`, as `taskset` sets it; "
                "`--no-pin`: all on every CPU); "
                if args.pin
                else "every process on every CPU (`--no-pin`); "
            )
            + (
                f"the write side at nice {args.priority} (its sessions' autogroups: other work "
                "on the machine does not take its CPUs' time); "
                if args.priority
                else "the write side at the default priority (other work on the machine shares "
                "its CPUs); "
            )
            + "PostgreSQL primary and asynchronous streaming standby with "
            "`hot_standby_feedback`. Registrations through a 2-worker server on the primary; "
            f"reads (the {args.entries:,}-entry ledger's export back to back, "
            f"{args.dashboards} dashboards polling its status every {args.poll:g} s) through a "
            "1-worker server reading the replica, or one reading the primary; the conditions "
            "interleaved round by round, the order reversed every other round. Each change "
            "is the median over the rounds of the round's ratio to the same round's window "
            f"without reads ({args.rounds} rounds), for registrations per second and for the "
            f"primary's CPU per registration; load average {os.getloadavg()[0]:.1f} at the "
            "end.",
            "",
            table(rows),
            "",
            sides_table(rows),
            END,
        ]
    )


def _cpus(cpus: set[int]) -> str:
    return ", ".join(str(c) for c in sorted(cpus))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument(
        "--rounds",
        type=int,
        default=8,
        help="interleaved rounds (at least 7 "
        "for the 10 %% bound: each a window of every condition)",
    )
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--datasets", type=int, default=16)
    parser.add_argument("--dashboards", type=int, default=20)
    parser.add_argument("--poll", type=float, default=5.0)
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="let every process run on every CPU (default: the primary, the writer and the "
        "registering clients on one half of the CPUs, the standby, the readers and the reading "
        "clients on the other)",
    )
    parser.add_argument(
        "--priority",
        type=int,
        default=0,
        help="run the write side (the primary, the writer server, the registering clients) at "
        "this nice value (negative needs CAP_SYS_NICE): other work on a shared machine then "
        "cannot take its CPUs",
    )
    parser.add_argument("--no-results", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)
    rows = summary(run(args))
    print(table(rows))
    print(sides_table(rows))
    if not args.no_results:
        write_section(section(args, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
