"""Two builds side by side: ``python -m benchmarks compare A B [--workload W]``.

``A`` and ``B`` (each ``SPEC`` or ``LABEL=SPEC``) are each a directory holding a checkout (``.``
is this one, uncommitted changes included; a ``git worktree`` of another commit) or a git ref of
this repository (``HEAD~1``, a branch, a commit), whose tree is ``git archive``d into a temporary
directory. Both builds run on this environment's interpreter and third-party packages, each with
its own ``app`` and ``core`` (on ``PYTHONPATH``) on a database its own migrations made.

Each round measures A and B once, in alternating order (A B, B A, A B, …), so that a shared
machine's drift and any advantage of going first fall on both alike; at least five rounds. The
table gives each build's median over the rounds and the median of the per-round ratios B / A
with their range: a ratio of two medians would divide figures from different rounds, which
ran at different speeds.

Workloads:

* ``http`` (default): each build served by uvicorn (``--workers``) for the whole run, ``--clients``
  clients registering on one hot ``basic`` dataset for ``--duration`` s per round (the load
  generator of ``service``): throughput (registrations answered per second) and the server's CPU
  time (user + system, all its processes) per registration; with ``--week`` the dataset is
  partitioned by day (a year open) and each registration selects the same seven days;
* ``register``: the service's ``register_invocation`` in a loop, no HTTP, and ``edge``: the same
  request through the app's ASGI interface (the in-process probes of ``write-path``,
  ``benchmarks/write_path_probe.py``): CPU ms per registration over ``--count`` registrations in
  a fresh process on a fresh copy of the build's database, and the registrations that one CPU
  second decides (1000 / CPU ms).

With ``--checkpoint-key`` (a PEM file, or none: a key made for the run) both builds run with
that checkpoint key (``ODOMETER_CHECKPOINT_KEY``), served and in process alike, so each signs
what it signs with a key: checkpoints every ``ODOMETER_CHECKPOINT_EVERY`` entries, and a receipt
on every 201 and settle/cancel answer where the build gives receipts.

It prints a JSON line per measurement and the table; it writes nothing to ``RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks.results import commit_of
from benchmarks.service import MODES
from benchmarks.service_setup import (
    ADMIN_KEY,
    call,
    create_dataset,
    loadavg,
    migrate,
    pg_drop,
    pg_recreate,
    run_load,
    running_server,
)

ROOT = Path(__file__).resolve().parent.parent
#: ``--week``: a daily partition, and the seven days each registration selects
DAILY = {"kind": "day", "unit": "record", "timezone": "UTC"}
WEEK = {"from": "2026-06-01", "to": "2026-06-07"}
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/odometer_compare"
WORKLOADS = ("http", "register", "edge")
MIN_ROUNDS = 5


@dataclass(frozen=True)
class Build:
    label: str
    spec: str  # as given: a directory or a git ref
    root: Path  # the tree that runs
    described: str  # what it is, for the table's heading


def _ref(spec: str) -> str | None:
    """The commit a git ref names in this repository, or None."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or None


def resolve(argument: str, scratch: Path) -> Build:
    """``[LABEL=]SPEC`` as a build: a directory as it is, a git ref extracted under ``scratch``."""
    label, _, spec = argument.rpartition("=")
    label = label or argument
    spec = spec or argument
    if Path(spec).is_dir():
        root = Path(spec).resolve()
        commit = commit_of(root)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        described = f"`{spec}` (" + (commit or "not a git checkout")
        described += ", with uncommitted changes)" if commit and dirty else ")"
        return Build(label, spec, root, described)
    commit = _ref(spec)
    if commit is None:
        raise SystemExit(f"compare: {spec!r} is neither a directory nor a git ref")
    root = scratch / f"{len(list(scratch.iterdir()))}-{commit[:12]}"
    root.mkdir()
    archive = scratch / f"{commit}.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), commit],
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    archive.unlink()
    return Build(label, spec, root, f"`{spec}` ({commit[:7]})")


def orders(rounds: int, count: int = 2) -> list[list[int]]:
    """The builds' order in each round: forwards, then backwards, alternately."""
    forwards = list(range(count))
    return [forwards if r % 2 == 0 else forwards[::-1] for r in range(rounds)]


# ---------------------------------------------------------------------------- databases
def _pg_url(base: str, suffix: str) -> str:
    return f"{base}_{suffix}"


def _pg_copy(template: str, copy: str) -> str:
    """A new database ``copy`` made from ``template`` (PostgreSQL's ``CREATE DATABASE …
    TEMPLATE``): a freshly migrated database without running the migrations again."""
    import psycopg

    parts = urlsplit(copy.replace("postgresql+psycopg://", "postgresql://"))
    name = parts.path.lstrip("/")
    source = urlsplit(template).path.lstrip("/")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    return urlunsplit(parts)


class Databases:
    """Each build's migrated database, and fresh copies of it for the in-process probes."""

    def __init__(self, backend: str, pg_url: str, workdir: Path) -> None:
        self.backend, self.pg_url, self.workdir = backend, pg_url, workdir
        self.templates: dict[str, str] = {}
        self.made: list[str] = []
        self.copies = 0

    def migrated(self, build: Build, index: int) -> str:
        if self.backend == "postgresql":
            url = pg_recreate(_pg_url(self.pg_url, f"b{index}"))
            self.made.append(url)
        else:
            url = f"sqlite:///{self.workdir / f'build-{index}.db'}"
        migrate(url, build.root)
        self.templates[build.label] = url
        return url

    def fresh(self, build: Build) -> str:
        """A copy of the build's migrated database that nothing has written to."""
        template = self.templates[build.label]
        self.copies += 1
        if self.backend == "postgresql":
            url = _pg_copy(template, _pg_url(self.pg_url, f"probe{self.copies % 2}"))
            if url not in self.made:
                self.made.append(url)
            return url
        path = self.workdir / f"probe-{self.copies}.db"
        shutil.copyfile(template.removeprefix("sqlite:///"), path)
        return f"sqlite:///{path}"

    def drop(self) -> None:
        for url in self.made:
            pg_drop(url)


# ---------------------------------------------------------------------------- signing
def key_env(key: str | None, workdir: Path) -> dict[str, str]:
    """The environment that gives both builds the checkpoint key ``key`` (a PEM file; ``""``:
    a key made for this run in ``workdir``); ``{}`` for none."""
    if key is None:
        return {}
    if key == "":
        from odometer_core.ledger.checkpoints import generate_key_pem

        made = workdir / "checkpoint-key.pem"
        made.write_bytes(generate_key_pem()[0])
        made.chmod(0o600)
        key = str(made)
    elif not Path(key).is_file():
        raise SystemExit(f"compare: --checkpoint-key {key!r} is not a file")
    return {"ODOMETER_CHECKPOINT_KEY": str(Path(key).resolve())}


# ---------------------------------------------------------------------------- workloads
Measure = Callable[[Build], dict[str, float]]


@contextmanager
def http_workload(
    builds: list[Build],
    dbs: Databases,
    workdir: Path,
    args: argparse.Namespace,
    env: dict[str, str],
) -> Iterator[Measure]:
    """Each build served for the whole run; a measurement is one load on its hot dataset."""
    with ExitStack() as stack:
        servers = {}
        paths = {}
        for i, build in enumerate(builds):
            url = dbs.migrated(build, i)
            server = stack.enter_context(
                running_server(
                    url, workdir / f"server-{i}.log", args.workers, root=build.root, env=env
                )
            )
            servers[build.label] = server
            dataset = create_dataset(
                server.port, f"compare {i}", "basic", partition=DAILY if args.week else None
            )
            if args.week:  # a year of days open, each registration selecting one week of it
                opened = {"open": {"from": "2026-01-01", "to": "2026-12-31"}}
                status, raw = call(server.port, "POST", f"/v1/datasets/{dataset}/blocks", opened)
                if status != 200:
                    raise RuntimeError(f"open blocks: {status} {raw[:300]!r}")
            paths[build.label] = f"/v1/datasets/{dataset}/invocations"
        body: dict[str, Any] = {"mechanism": MODES["basic"]}
        if args.week:
            body["blocks"] = WEEK

        def measure(build: Build) -> dict[str, float]:
            server = servers[build.label]
            spec = {
                "kind": "http", "host": "127.0.0.1", "port": server.port, "key": ADMIN_KEY,
                "paths": [paths[build.label]], "body": body,
                "clients": args.clients, "duration": args.duration, "warmup": args.warmup,
            }  # fmt: skip
            cpu0 = server.cpu_seconds()
            out = run_load(spec)
            cpu = server.cpu_seconds() - cpu0
            # the server's CPU covers the warm-up's registrations too
            answered = out["ok"] * (args.duration + args.warmup) / args.duration
            return {
                "throughput": out["throughput"],
                "cpu_ms": cpu * 1000 / answered if answered else float("nan"),
                "errors": out["errors"],
            }

        yield measure


@contextmanager
def probe_workload(
    builds: list[Build], dbs: Databases, args: argparse.Namespace, env: dict[str, str]
) -> Iterator[Measure]:
    """A measurement is one probe of ``write-path`` in a fresh process on a fresh database."""
    from benchmarks.write_path import probe

    kind = {"register": "service", "edge": "edge"}[args.workload]
    for i, build in enumerate(builds):
        dbs.migrated(build, i)

    def measure(build: Build) -> dict[str, float]:
        cpu_ms = probe(build.root, dbs.fresh(build), args.count, kind, "0", env=env)
        return {"throughput": 1000 / cpu_ms, "cpu_ms": cpu_ms, "errors": 0}

    yield measure


# ---------------------------------------------------------------------------- the table
#: metric → (its row's label, digits)
METRICS = {
    "http": {
        "throughput": ("registrations/s", 0),
        "cpu_ms": ("server CPU ms per registration", 3),
    },
    "in process": {
        "throughput": ("registrations per CPU second", 0),
        "cpu_ms": ("CPU ms per registration", 3),
    },
}


def summarise(rows: list[dict[str, Any]], a: str, b: str) -> dict[str, dict[str, Any]]:
    """Per metric: each build's median and the median, least and greatest of the per-round
    ratios ``b / a``."""
    out: dict[str, dict[str, Any]] = {}
    for metric in ("throughput", "cpu_ms"):
        by_round: dict[int, dict[str, float]] = {}
        for row in rows:
            by_round.setdefault(row["round"], {})[row["build"]] = row[metric]
        ratios = [r[b] / r[a] for r in by_round.values() if r.get(a) and b in r]
        out[metric] = {
            a: statistics.median(r[a] for r in by_round.values()),
            b: statistics.median(r[b] for r in by_round.values()),
            "ratio": statistics.median(ratios) if ratios else float("nan"),
            "low": min(ratios, default=float("nan")),
            "high": max(ratios, default=float("nan")),
        }
    return out


def render(rows: list[dict[str, Any]], builds: list[Build], heading: str, workload: str) -> str:
    a, b = builds[0].label, builds[1].label
    summary = summarise(rows, a, b)
    metrics = METRICS["http" if workload == "http" else "in process"]
    lines = [
        heading,
        "",
        f"*{a}* = {builds[0].described}; *{b}* = {builds[1].described}.",
        "",
        f"| | {a} | {b} | {b} / {a}: median of the per-round ratios (range) |",
        "|---|---:|---:|---:|",
    ]
    for metric, (name, digits) in metrics.items():
        s = summary[metric]
        lines.append(
            f"| {name} | {s[a]:,.{digits}f} | {s[b]:,.{digits}f} "
            f"| {s['ratio']:.3f} ({s['low']:.3f}–{s['high']:.3f}) |"
        )
    errors = sum(int(r["errors"]) for r in rows)
    lines += ["", f"Errors (non-2xx or transport): **{errors}**."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks compare",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("a", metavar="A", help="[LABEL=]DIR or [LABEL=]GIT-REF: the reference")
    p.add_argument("b", metavar="B", help="[LABEL=]DIR or [LABEL=]GIT-REF: compared with A")
    p.add_argument("--workload", choices=WORKLOADS, default="http")
    p.add_argument("--rounds", type=int, default=MIN_ROUNDS, help=f"at least {MIN_ROUNDS}")
    p.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument(
        "--pg-url",
        default=os.environ.get("ODOMETER_BENCH_POSTGRES_URL", DEFAULT_PG),
        help="PostgreSQL server and database name prefix (its databases are dropped and "
        "created anew)",
    )
    p.add_argument("--clients", type=int, default=8, help="http: concurrent clients")
    p.add_argument(
        "--week",
        action="store_true",
        help="http: the hot dataset partitioned by day (a year open), each registration "
        "selecting the same seven days",
    )
    p.add_argument("--duration", type=float, default=3.0, help="http: seconds per measurement")
    p.add_argument("--warmup", type=float, default=1.0, help="http: seconds before each")
    p.add_argument("--workers", type=int, default=2, help="http: uvicorn workers per build")
    p.add_argument("--count", type=int, default=1000, help="register, edge: registrations")
    p.add_argument(
        "--checkpoint-key",
        nargs="?",
        const="",
        default=None,
        metavar="PEM",
        help="run both builds with this checkpoint key (none given: one made for the run), so "
        "that each signs its checkpoints and, where it gives them, its receipts",
    )
    args = p.parse_args(argv)
    if args.rounds < MIN_ROUNDS:
        p.error(f"--rounds: at least {MIN_ROUNDS} (a median of per-round ratios needs them)")
    if args.backend == "sqlite" and args.workload == "http" and args.workers > 1:
        print("compare: SQLite with several workers serialises on the file's write lock")
    with tempfile.TemporaryDirectory(prefix="odometer-compare-") as tmp:
        workdir = Path(tmp)
        scratch = workdir / "builds"
        scratch.mkdir()
        builds = [resolve(args.a, scratch), resolve(args.b, scratch)]
        if builds[0].label == builds[1].label:
            builds[1] = replace(builds[1], label=f"{builds[1].label} (B)")
        dbs = Databases(args.backend, args.pg_url, workdir)
        env = key_env(args.checkpoint_key, workdir)
        rows: list[dict[str, Any]] = []
        try:
            workload = (
                http_workload(builds, dbs, workdir, args, env)
                if args.workload == "http"
                else probe_workload(builds, dbs, args, env)
            )
            with workload as measure:
                for r, order in enumerate(orders(args.rounds)):
                    for i in order:
                        build = builds[i]
                        row = {"round": r, "build": build.label, "loadavg": loadavg()}
                        row.update(measure(build))
                        print(json.dumps(row), flush=True)
                        rows.append(row)
        finally:
            dbs.drop()
    if args.workload == "http":
        what = (
            f"**{args.workload}**: {args.clients} clients on one hot `basic` dataset"
            + (", partitioned by day, each registration selecting 7 days" if args.week else "")
            + f", uvicorn with {args.workers} worker(s), {args.duration:g} s per measurement"
        )
    else:
        what = f"**{args.workload}**, in process: {args.count:,} registrations per measurement"
    signing = (
        "; with a checkpoint key (receipts signed where the build gives them)"
        if args.checkpoint_key is not None
        else "; without a checkpoint key"
    )
    heading = (
        f"{what}, {args.backend}{signing}; {args.rounds} rounds, the builds' order "
        f"alternating; load average {loadavg()}."
    )
    print()
    print(render(rows, builds, heading, args.workload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
