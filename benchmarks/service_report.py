"""Render ``benchmarks/service.py`` results: the RESULTS.md section and an SVG plot.

The plot is hand-written SVG (a few polylines on log-scaled axes) so that the benchmark needs
no plotting library: matplotlib would be a heavy dependency for two small charts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

BEGIN, END = "<!-- service:begin -->", "<!-- service:end -->"
SYSTEMS = ("baseline", "basic", "zcdp", "rdp")
#: The PostgreSQL-only system of ``benchmarks/service.py`` (datasets in their own organisations).
ORGS = "basic, own orgs"
COLOURS = {"baseline": "#222222", "basic": "#1f77b4", "zcdp": "#2ca02c", "rdp": "#d62728"}
#: Targets of the lean-write-path issue: service (basic) / raw-baseline throughput on one hot
#: PostgreSQL dataset at N clients, on many datasets at N = 8, on the hot SQLite dataset; p99 and
#: p99 / p50 at 32 clients (hot, PostgreSQL); server CPU per admission (basic, PostgreSQL).
HOT_RATIO_TARGETS = {1: 0.6, 32: 1.0}
MANY_RATIO_TARGET = (8, 0.4)
SQLITE_RATIO_TARGET = 0.4
P99_TARGET_MS = 50.0
P99_P50_TARGET = 3.0
P99_CLIENTS = 32
CPU_TARGET_MS = 1.5
PROFILE_NOTES = Path(__file__).with_name("service_profile.md")
#: Fewer GIL-holding samples than this say nothing about where CPU time goes.
MIN_PROFILE_SAMPLES = 50


#: Profile categories, first match wins (a frame substring anywhere in the sampled stack).
_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("accounting core (`admit`)", ("core/odometer_core/accounting/",)),
    ("ledger hash (canonical JSON + SHA-256)", ("core/odometer_core/ledger/chain",)),
    ("DB: the lock statement (`read_levels`)", ("read_levels (app/writepath/admission",)),
    ("DB: the write statement (`write`)", ("write (app/db/writes",)),
    ("DB: COMMIT", ("commit (app/services/invocations",)),
    (
        "DB: pool checkout, liveness check, session",
        ("sqlalchemy/pool", "do_ping", "is_alive", "UnitOfWork"),
    ),
    ("service: building the entry and response", ("app/services/",)),
    ("FastAPI / Starlette / pydantic", ("fastapi/", "starlette/", "pydantic")),
    ("uvicorn + httptools (HTTP)", ("uvicorn/", "h11/")),
)


def profile_breakdown(raw: Path) -> dict[str, Any]:
    """Share of GIL-holding samples per category, and the top leaf functions."""
    cats: dict[str, int] = {}
    leaves: dict[str, int] = {}
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        name = next(
            (c for c, keys in _CATEGORIES if any(k in stack for k in keys)),
            "event loop, threads, other",
        )
        cats[name] = cats.get(name, 0) + n
        leaf = stack.rsplit(";", 1)[-1].split(" (")[0]
        leaves[leaf] = leaves.get(leaf, 0) + n
    top = sorted(leaves.items(), key=lambda kv: -kv[1])[:8]
    return {
        "samples": total,
        "categories": {
            k: round(v / total, 3) for k, v in sorted(cats.items(), key=lambda kv: -kv[1])
        }
        if total
        else {},
        "top_leaves": {k: round(v / total, 3) for k, v in top} if total else {},
    }


def total_errors(result: dict[str, Any]) -> int:
    n = 0
    for data in result["backends"].values():
        n += sum(r["errors"] for r in data["runs"])
        n += sum(g["admission"]["errors"] + g["export_errors"] for g in data["growth"])
    return n


def _runs(result: dict[str, Any], backend: str, scenario: str) -> list[dict[str, Any]]:
    data = result["backends"].get(backend)
    return [r for r in data["runs"] if r["scenario"] == scenario] if data else []


def _cell(runs: list[dict[str, Any]], system: str, clients: int) -> dict[str, Any] | None:
    for r in runs:
        if r["system"] == system and r["clients"] == clients:
            return r
    return None


def _fmt(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


# ---------------------------------------------------------------------------- markdown
def _matrix_table(result: dict[str, Any], backend: str, scenario: str) -> list[str]:
    runs = _runs(result, backend, scenario)
    clients = sorted({r["clients"] for r in runs})
    systems = [*SYSTEMS, *([ORGS] if any(r["system"] == ORGS for r in runs) else [])]
    extra = f" | {ORGS} (1 dataset per organisation)" if ORGS in systems else ""
    lines = [
        f"| N | load | baseline req/s (p50 / p99 ms) | basic | zcdp | rdp{extra} "
        "| basic / baseline | service CPU ms / req (basic) |",
        "|---|---|---|---|---|---|---|---|" + ("---|" if extra else ""),
    ]
    for n in clients:
        cells = []
        for system in systems:
            r = _cell(runs, system, n)
            cells.append(
                "–"
                if r is None
                else f"{_fmt(r['throughput'], 0)} ({_fmt(r['p50_ms'])} / {_fmt(r['p99_ms'])})"
                + (f" **{r['errors']} errors**" if r["errors"] else "")
            )
        base, basic = _cell(runs, "baseline", n), _cell(runs, "basic", n)
        ratio = (
            basic["throughput"] / base["throughput"]
            if base and basic and base["throughput"]
            else None
        )
        load = _cell(runs, "baseline", n)
        cpu = basic.get("service_cpu_ms_per_req") if basic else None
        lines.append(
            f"| {n} | {load['loadavg'] if load else '–'} | "
            + " | ".join(cells)
            + f" | {_fmt(ratio, 2)} | {_fmt(cpu, 2)} |"
        )
    return lines


def _ratio(runs: list[dict[str, Any]], n: int) -> float | None:
    base, basic = _cell(runs, "baseline", n), _cell(runs, "basic", n)
    if base and basic and base["throughput"]:
        return float(basic["throughput"] / base["throughput"])
    return None


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def _ratio_line(runs: list[dict[str, Any]], what: str, targets: dict[int, float]) -> str:
    """Service (basic) / baseline throughput per N, with the verdict at each N that has one."""
    parts = []
    for n in sorted({r["clients"] for r in runs}):
        x = _ratio(runs, n)
        if x is None:
            continue
        target = targets.get(n)
        parts.append(
            f"N = {n}: {x:.2f}"
            + ("" if target is None else f" (target ≥ {target:g}: {_verdict(x >= target)})")
        )
    return f"- Service (`basic`) / raw baseline throughput, {what}: {'; '.join(parts)}."


def _targets(result: dict[str, Any]) -> list[str]:
    lines = []
    runs = _runs(result, "postgresql", "hot")
    if runs:
        loads = [r["loadavg"] for r in runs]
        lines.append(
            _ratio_line(
                runs,
                f"one hot dataset, PostgreSQL (load {min(loads)}–{max(loads)})",
                HOT_RATIO_TARGETS,
            )
        )
        cpu = [
            f"N = {r['clients']}: {_fmt(r.get('service_cpu_ms_per_req'), 2)} ms"
            for r in runs
            if r["system"] == "basic"
        ]
        one = _cell(runs, "basic", 1)
        cpu_one = one.get("service_cpu_ms_per_req") if one else None
        lines.append(
            f"- Server CPU per admission (basic, hot, PostgreSQL): {', '.join(cpu)} "
            f"(target ≤ {CPU_TARGET_MS:g} ms at N = 1: "
            f"{_verdict(cpu_one is not None and cpu_one <= CPU_TARGET_MS)})."
        )
    many = _runs(result, "postgresql", "many")
    if many:
        n, target = MANY_RATIO_TARGET
        line = _ratio_line(many, "many datasets, PostgreSQL", {n: target})
        cell = _cell(many, "basic", n)
        split = cell.get("connections_per_worker") if cell else None
        if split:
            line = (
                f"{line[:-1]}; at N = {n} the clients' connections were split "
                f"{' / '.join(map(str, split))} between the workers (half-way through the cell)."
            )
        lines.append(line)
    lite = _runs(result, "sqlite", "hot")
    if lite:
        targets = {r["clients"]: SQLITE_RATIO_TARGET for r in lite}
        lines.append(_ratio_line(lite, "one hot dataset, SQLite", targets))
    extra = result.get("supplementary", {}).get("postgresql_quieter_rerun")
    if extra:
        quiet = [r for r in extra["postgresql"]["runs"] if r["scenario"] == "hot"]
        load = extra["machine"]["loadavg_start"][0]
        lines.append(
            _ratio_line(quiet, f"the same in the quieter repeat (load {load})", HOT_RATIO_TARGETS)
        )
    for backend in result["backends"]:
        cells = [
            r
            for r in _runs(result, backend, "hot")
            if r["clients"] == P99_CLIENTS and r["system"] != "baseline"
        ]
        if not cells:
            continue
        p99 = [
            f"{r['system']} {_fmt(r['p99_ms'])} ms (p99 / p50 "
            f"{_fmt((r['p99_ms'] or math.inf) / (r['p50_ms'] or math.inf), 1)})"
            for r in cells
        ]
        worst = max(r["p99_ms"] or math.inf for r in cells)
        spread = max((r["p99_ms"] or math.inf) / (r["p50_ms"] or math.inf) for r in cells)
        base = _cell(_runs(result, backend, "hot"), "baseline", P99_CLIENTS)
        raw = (
            f"; the raw baseline's own: {_fmt(base['p99_ms'])} ms (p99 / p50 "
            f"{_fmt(base['p99_ms'] / base['p50_ms'], 1)})"
            if base and base["p50_ms"]
            else ""
        )
        lines.append(
            f"- p99 at {P99_CLIENTS} clients, hot dataset, {backend}: {', '.join(p99)}{raw} "
            f"(targets p99 ≤ {P99_TARGET_MS:g} ms: {_verdict(worst <= P99_TARGET_MS)}, "
            f"p99 / p50 ≤ {P99_P50_TARGET:g}: {_verdict(spread <= P99_P50_TARGET)})."
        )
    errors = total_errors(result)
    requests = sum(r["ok"] + r["errors"] for d in result["backends"].values() for r in d["runs"])
    lines.append(
        f"- Errors (non-2xx or transport) in {requests:,} measured requests: **{errors}**."
    )
    for backend, data in result["backends"].items():
        grown = data["growth"]
        if len(grown) >= 2:
            p50 = [g["admission"]["p50_ms"] or math.inf for g in grown]
            spread = max(p50) / min(p50)
            sizes = ", ".join(
                f"{g['size']:,}: {_fmt(g['admission']['p50_ms'], 2)} ms" for g in grown
            )
            verdict = "flat" if spread < 1.5 else "NOT flat"
            lines.append(
                f"- Admission p50 vs ledger length, {backend}: {sizes} "
                f"(max / min = {spread:.2f}: **{verdict}**)."
            )
    return lines


def _supplementary(result: dict[str, Any]) -> list[str]:
    """The PostgreSQL matrix repeated on a quieter machine (kept in the same raw JSON)."""
    extra = result.get("supplementary", {}).get("postgresql_quieter_rerun")
    if not extra:
        return []
    sub = {"backends": {"postgresql": extra["postgresql"]}}
    load = " / ".join(str(x) for x in extra["machine"]["loadavg_start"])
    out = [
        f"### postgresql again, quieter machine (run {extra['started'][:16].replace('T', ' ')} "
        f"UTC, load average at start {load})",
        "",
        f"Why: {extra['why']}. Command: `{extra['command']}`.",
        "",
    ]
    for scenario, title in (("hot", "one hot dataset"), ("many", "many datasets")):
        out += [f"{title}:", "", *_matrix_table(sub, "postgresql", scenario), ""]
    return out


def _nagle_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| backend | N | plain `uvicorn --workers` req/s (p50 / p99 ms) | with TCP_NODELAY "
        "on the listener (matrix) | load (plain) |",
        "|---|---|---|---|---|",
    ]
    for backend, data in result["backends"].items():
        for r in data.get("plain_uvicorn", []):
            fixed = _cell(_runs(result, backend, "hot"), "basic", r["clients"])
            lines.append(
                f"| {backend} | {r['clients']} | {_fmt(r['throughput'], 0)} "
                f"({_fmt(r['p50_ms'])} / {_fmt(r['p99_ms'])}) | "
                + (
                    f"{_fmt(fixed['throughput'], 0)} ({_fmt(fixed['p50_ms'])} / "
                    f"{_fmt(fixed['p99_ms'])})"
                    if fixed
                    else "–"
                )
                + f" | {r['loadavg']} |"
            )
    return lines


def _growth_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| backend | ledger rows | load | admission req/s | p50 / p99 ms | export s (MB) "
        "| report s |",
        "|---|---|---|---|---|---|---|",
    ]
    for backend, data in result["backends"].items():
        for g in data["growth"]:
            a = g["admission"]
            if g.get("report_timed_out"):
                report = f"> {g['report_s']:g} (timed out)"
            elif g["report_s"] is not None:
                report = _fmt(g["report_s"], 3)
            else:
                report = f"HTTP {g['report_status']} (route absent?)"
            lines.append(
                f"| {backend} | {g['size']:,} | {g['loadavg']} | {_fmt(a['throughput'], 0)} | "
                f"{_fmt(a['p50_ms'], 2)} / {_fmt(a['p99_ms'], 2)} | "
                f"{_fmt(g['export_s'], 2)} ({g['export_mb']}) | {report} |"
            )
    return lines


def markdown(result: dict[str, Any], *, svg_name: str = "service.svg") -> str:
    m, plan = result["machine"], result["plan"]
    out = [
        BEGIN,
        "## Service throughput and latency",
        "",
        f"Run {result['started'][:16].replace('T', ' ')} UTC. Command: `python -m benchmarks "
        f"service` (or `make bench-service`; `--quick` for a smoke run).",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GB RAM; CPython {m['python']}, "
        f"PostgreSQL {m['postgresql'] or '–'}, SQLite {m['sqlite']}; load average at start "
        f"{' / '.join(str(x) for x in m['loadavg_start'])} (1 / 5 / 15 min). The machine is "
        "shared: other jobs ran during the measurement, so each row records the 1-minute load "
        "average before it and the baseline and service runs of one N are interleaved.",
        "",
        f"Set-up: uvicorn with {plan['workers']} workers (`--no-access-log`) started through "
        "`python -m app.serve` (uvicorn on a listening socket with TCP_NODELAY, as `make run` "
        "and the Dockerfile start it; see *Nagle* below for why and for the plain command "
        "line), the operator admin "
        "key (authenticated in memory), no idempotency keys; closed-loop clients, one keep-alive "
        "connection each, all in one separate asyncio process, latency measured per request at "
        f"the client; {plan['warmup']:g} s warm-up then {plan['duration']:g} s measured per cell. "
        "PostgreSQL connections: at most 24 on each side (the baseline opens min(N, 24); the "
        "service's workers share 24 as their pools, no overflow) because `max_connections` "
        "(100) is shared with other jobs; more clients queue for a connection on both sides. "
        "Budgets are large enough that nothing is refused; any non-2xx answer counts as an "
        "error. Declarations: `basic` pure ε = 0.001, `zcdp` ρ = 10⁻⁶, `rdp` Gaussian σ = 100 "
        "(16-order curve). Many datasets: "
        f"{plan['many']:,} per mode, picked at random per request.",
        "",
        "Baseline: the same durable work without the service, per request `BEGIN`; `SELECT … "
        "FOR UPDATE` of one budget row (SQLite: `BEGIN IMMEDIATE`, the process's writers queued "
        "on a lock as the service's are); `UPDATE` it; `INSERT` one ledger row with the "
        "service's columns, JSON sizes, unique `(dataset_id, seq)` and index, SHA-256-chained; "
        "`COMMIT` — psycopg 3 (async) / sqlite3 threads, "
        "`synchronous_commit=on` / WAL + `synchronous=FULL` as the service uses.",
        "",
        "### Targets",
        "",
        *_targets(result),
        "",
    ]
    for backend in result["backends"]:
        for scenario, title in (("hot", "one hot dataset"), ("many", "many datasets")):
            out += [
                f"### {backend}, {title}: throughput (req/s) and latency",
                "",
                *_matrix_table(result, backend, scenario),
                "",
            ]
    out += _supplementary(result)
    for backend, reason in result.get("skipped", {}).items():
        out += [f"{backend} skipped: {reason}", ""]
    out += [
        "### Nagle: the plain uvicorn command line with several workers",
        "",
        "With `--workers N` uvicorn's supervisor binds the listening socket without "
        "`IPPROTO_TCP`; asyncio then leaves Nagle's algorithm on for accepted connections and "
        "every keep-alive response body (written after its headers) waits for the client's "
        "delayed ACK, about 40 ms (uvicorn issue #3149, open). `--workers 1` is not affected. "
        "Hot dataset, `basic`:",
        "",
        *_nagle_table(result),
        "",
        "### Ledger growth",
        "",
        "Ledgers prefilled with valid hash-chained entries (`benchmarks/ledger_gen.py`, "
        "inserted with `COPY` / `executemany`, the dataset's head and state set as "
        "`append_entry` leaves them); admission: one client, the median of "
        "3 runs per size taken round-robin over the sizes (so that load drift hits every size "
        "alike); export = every page of "
        f"`GET …/ledger?limit={plan['export_page']:,}` (JSON) read to the end; report = "
        "`GET …/report`.",
        "",
        *_growth_table(result),
        "",
        f"![throughput and p99 latency vs clients]({svg_name})",
        "",
    ]
    out += _profiles(result)
    if PROFILE_NOTES.exists():
        out += [PROFILE_NOTES.read_text().strip(), ""]
    out.append(END)
    return "\n".join(out)


def _profiles(result: dict[str, Any]) -> list[str]:
    """The py-spy summaries recorded during the run (GIL-holding samples of one worker)."""
    out: list[str] = []
    for backend, data in result["backends"].items():
        for r in data["runs"]:
            prof = r.get("profile")
            if not prof:
                continue
            if prof["samples"] < MIN_PROFILE_SAMPLES:
                out += [
                    f"(Profile of {backend}, `{r['system']}`, N = {r['clients']}: only "
                    f"{prof['samples']} samples — the sampled worker was mostly idle or "
                    "waiting, so no breakdown is shown.)",
                    "",
                ]
                continue
            out += [
                f"### Profile: {backend}, hot dataset, `{r['system']}`, N = {r['clients']}",
                "",
                f"py-spy `--gil` on one worker during the run ({prof['samples']:,} samples "
                "while that worker held the GIL; the share of its CPU time per category):",
                "",
                "| where | share |",
                "|---|---|",
                *(f"| {k} | {v:.0%} |" for k, v in prof["categories"].items()),
                "",
                "Top leaf functions: "
                + ", ".join(f"`{k}` {v:.0%}" for k, v in prof["top_leaves"].items())
                + ".",
                "",
            ]
    return out


# ---------------------------------------------------------------------------- SVG
_W, _H, _PAD = 380, 250, 50


def _panel(
    x0: float, y0: float, title: str, series: dict[str, list[tuple[int, float]]], ylabel: str
) -> list[str]:
    """One log-log chart at (x0, y0): a polyline per system."""
    points = [p for pts in series.values() for p in pts if p[1] > 0]
    if not points:
        return []
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    lx0, lx1 = math.log10(min(xs)), math.log10(max(xs)) or 1.0
    ly0 = math.floor(math.log10(min(ys)))
    ly1 = math.ceil(math.log10(max(ys)))
    if ly1 == ly0:
        ly1 += 1
    pw, ph = _W - _PAD - 15, _H - _PAD - 30

    def sx(x: float) -> float:
        span = (lx1 - lx0) or 1.0
        return x0 + _PAD + (math.log10(x) - lx0) / span * pw

    def sy(y: float) -> float:
        return y0 + 25 + ph - (math.log10(y) - ly0) / (ly1 - ly0) * ph

    out = [
        f'<text x="{x0 + _W / 2}" y="{y0 + 15}" text-anchor="middle" font-weight="bold">'
        f"{escape(title)}</text>",
        f'<rect x="{x0 + _PAD}" y="{y0 + 25}" width="{pw}" height="{ph}" fill="none" '
        'stroke="#999"/>',
        f'<text x="{x0 + 12}" y="{y0 + 25 + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 {x0 + 12} {y0 + 25 + ph / 2})">{escape(ylabel)}</text>',
    ]
    for e in range(ly0, ly1 + 1):
        y = sy(10.0**e)
        out.append(
            f'<line x1="{x0 + _PAD}" x2="{x0 + _PAD + pw}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#eee"/>'
        )
        out.append(
            f'<text x="{x0 + _PAD - 4}" y="{y + 4:.1f}" text-anchor="end">{10.0**e:g}</text>'
        )
    for x in sorted(set(xs)):
        out.append(f'<text x="{sx(x):.1f}" y="{y0 + 25 + ph + 14}" text-anchor="middle">{x}</text>')
    out.append(
        f'<text x="{x0 + _PAD + pw / 2}" y="{y0 + 25 + ph + 28}" text-anchor="middle">'
        "concurrent clients</text>"
    )
    for system, pts in series.items():
        pts = [p for p in pts if p[1] > 0]
        if not pts:
            continue
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="5,3"' if system == "baseline" else ""
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{COLOURS[system]}" '
            f'stroke-width="2"{dash}/>'
        )
    return out


def svg(result: dict[str, Any]) -> str:
    """Throughput and p99 vs clients on the hot dataset, one row of panels per backend."""
    backends = list(result["backends"])
    height = _H * max(1, len(backends)) + 30
    body: list[str] = []
    for row, backend in enumerate(backends):
        runs = _runs(result, backend, "hot")
        tput: dict[str, list[tuple[int, float]]] = {}
        p99: dict[str, list[tuple[int, float]]] = {}
        for system in SYSTEMS:
            rs = sorted((r for r in runs if r["system"] == system), key=lambda r: r["clients"])
            tput[system] = [(r["clients"], r["throughput"]) for r in rs]
            p99[system] = [(r["clients"], r["p99_ms"] or 0.0) for r in rs]
        body += _panel(0, row * _H, f"{backend}: throughput, hot dataset", tput, "req/s")
        body += _panel(_W, row * _H, f"{backend}: p99 latency, hot dataset", p99, "ms")
    legend_y = height - 12
    for i, system in enumerate(SYSTEMS):
        x = 60 + i * 150
        dash = ' stroke-dasharray="5,3"' if system == "baseline" else ""
        body.append(
            f'<line x1="{x}" x2="{x + 25}" y1="{legend_y - 4}" y2="{legend_y - 4}" '
            f'stroke="{COLOURS[system]}" stroke-width="2"{dash}/>'
        )
        label = "raw database" if system == "baseline" else f"service, {system}"
        body.append(f'<text x="{x + 30}" y="{legend_y}">{label}</text>')
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * _W}" height="{height}" '
        f'font-family="sans-serif" font-size="11">\n'
        f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n"
    )
