"""``odometer export`` (a dataset's whole ledger to a file ``odometer verify`` reads) and
``odometer report`` (status, refunds, rejections, per-analyst spend and the replay verdict)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from odometer_client._cli.datasets import dataset_lines
from odometer_client._cli.output import Output, text_of
from odometer_client._cli.run import command
from odometer_client._sync.client import OdometerClient
from odometer_client.errors import OdometerError
from odometer_client.exports import EXPORT_FORMATS, ExportFormat, format_of
from odometer_client.ledger import summarize


# ---------------------------------------------------------------------------- export
def export_format(args: argparse.Namespace) -> ExportFormat:
    """``--format``, else the one ``-o``'s name asks for (:func:`format_of`), as the client's
    ``export()`` chooses."""
    if args.format is not None:
        chosen: ExportFormat = args.format
        return chosen
    return format_of(args.output)


def _export(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    form = export_format(args)
    try:
        count = client.export(args.dataset, args.output, form)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OdometerError(
            f"cannot write {args.output}: {reason}: give -o a writable path"
        ) from None
    if args.json:
        out.json(
            {"dataset_id": args.dataset, "entries": count, "path": args.output, "format": form}
        )
    else:
        out.line(f"wrote {count} entries of {args.dataset} to {args.output} ({form})")
    return 0


# ---------------------------------------------------------------------------- report
def _report(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    found = client.report(args.dataset)
    if found is not None:  # the server's (GET …/report); it always replays
        if args.json:
            out.json(found.raw)
        else:
            _server_report_lines(found.raw, out)
        return 0 if found.verified else 1
    ds = client.get_dataset(args.dataset)  # a server without the route: summed up here
    entries = [entry.raw for entry in client.ledger(ds, page_size=10_000)]
    report = summarize(ds.raw, entries, verify=args.verify)
    report["source"] = "client"
    if args.json:
        out.json(report)
        return 0
    dataset_lines(ds, out)
    _ledger_lines(report["ledger"], out)
    # summed up here from the ledger: no server text, every amount exact
    refunded = out.figure(report["refunded_epsilon"])
    out.line(f"refunded ε (settlements and cancellations): {refunded}")
    if report["curve_charges"]:
        out.line(f"curve-based charges (no scalar ε per entry): {report['curve_charges']}")
    actors = report["actors"]
    if actors:
        out.line("\nper actor:")
        rows: list[Sequence[str]] = [
            (
                *("actor", "invocations", "rejected", "settled", "cancelled"),
                *("net ε", "net δ", "refunded ε"),
            )
        ]
        for actor, row in actors.items():
            counts = (str(row[k]) for k in ("invocations", "rejected", "settled", "cancelled"))
            rows.append(
                (
                    actor,
                    *counts,
                    out.figure(row["epsilon"]),
                    out.figure(row["delta"]),
                    out.figure(row["refunded_epsilon"]),
                )
            )
        out.table(rows)
    verification = report.get("verification")
    if verification is None:
        return 0
    verdict = "OK" if verification["ok"] else "FAILED"
    out.line(
        f"\nreplay verification: {verdict} ({verification['entries']} entries, "
        f"head {verification['head_hash']})"
    )
    for problem in verification["problems"]:
        out.line(f"  problem: {problem}")
    return 0 if verification["ok"] else 1


def _with_texts(rows: Sequence[Mapping[str, Any]], key: str, texts: Any) -> list[Mapping[str, Any]]:
    """The report's rows, each with its texts (the report's ``shown`` by actor or kind) as its
    own ``shown``, for :func:`text_of`; the rows unchanged where the server sent none."""
    found = texts if isinstance(texts, Mapping) else {}
    return [{**row, "shown": found[row[key]]} if row.get(key) in found else row for row in rows]


def _ledger_lines(ledger: Mapping[str, Any], out: Output) -> None:
    out.line(f"\nledger: {ledger['entries']} entries; by kind:")
    for kind, n in ledger["kinds"].items():
        out.line(f"  {kind:<22} {n}")


def _status_amounts(
    owner: Mapping[str, Any], field: str, out: Output, texts: Mapping[str, Any] | None = None
) -> str:
    """A report's amount ``owner[field]``: scalars as the server's text of them (``owner``'s
    ``shown``, or ``texts``: the report's for the rows it keeps as they are), an RDP curve
    named; under ``--exact`` every field as the server wrote it (curves, and which orders are
    dead, included)."""
    obj = owner.get(field)
    if out.exact:
        return ", ".join(f"{k}={v}" for k, v in (obj or {}).items()) or "-"
    shown = text_of(owner if texts is None else {"shown": texts}, field)
    return out.amounts(obj, shown=shown, curve="RDP curve (--exact prints it)")


#: The outcome counts of a per-analyst row, in their columns' order.
COUNTS = ("accepted", "reserved", "rejected", "settled", "cancelled")


def _server_report_lines(report: Mapping[str, Any], out: Output) -> None:
    """The server's report (``GET …/report``) as text: the reading first (``status.summary``),
    then status, refunds, rejections, ledger summary, per-analyst spend, chain head and the
    replay verdict."""
    ds, st = report["dataset"], report["status"]
    summary = st.get("summary")
    if isinstance(summary, Mapping) and summary.get("text"):
        out.line(str(summary["text"]))
    refunds, rejections = report["refunds"], report["rejections"]
    # the rows' texts sit beside them in the report's shown (by actor, by kind, refunds)
    sent = report.get("shown")
    texts: Mapping[str, Any] = sent if isinstance(sent, Mapping) else {}
    levels = ", ".join(f"{k}: {n}" for k, n in rejections["by_level"].items())
    rows = [
        ("dataset", f"{ds['id']}  {ds['name']!r}"),
        ("mode / relation", f"{ds['mode']} / {ds['relation']}"),
        ("budget", _status_amounts(st, "budget", out)),
    ]
    if "spent" in st:  # a split dataset's are its sub-budgets' (the reading above; --json)
        rows.append(("spent", _status_amounts(st, "spent", out)))
    if "remaining" in st:
        rows.append(("remaining", _status_amounts(st, "remaining", out)))
    rows += [
        (
            "refunds (ODP savings)",
            _status_amounts(refunds, "odp_savings", out, texts.get("refunds")),
        ),
        ("refunds (all)", _status_amounts(refunds, "total", out, texts.get("refunds"))),
        ("rejections", f"{rejections['total']}" + (f" ({levels})" if levels else "")),
    ]
    out.pairs(rows, colon=True)
    for reason, n in rejections["by_reason"].items():
        out.line(f"  {n:>5}  {reason}")
    _ledger_lines(report["ledger"], out)
    unit = report["series"]["unit"]
    spenders: tuple[tuple[str, Sequence[Mapping[str, Any]]], ...] = (
        ("analyst", _with_texts(report["analysts"], "actor", texts.get("analysts"))),
        ("kind", _with_texts(report.get("mechanisms") or [], "kind", texts.get("mechanisms"))),
    )
    for who, totals in spenders:
        if not totals:
            continue
        if ds["mode"] == "basic":
            _basic_rows(who, totals, unit, out)
        else:
            _attributed_rows(who, totals, ds["mode"], out)
    head, verdict = report["chain_head"], report["verification"]
    out.line(f"\nchain head: seq {head['seq']} {head['hash']}")
    outcome = "OK" if verdict["ok"] else "FAILED"
    out.line(f"replay verification: {outcome} ({verdict['entries']} entries)")
    for problem in verdict["problems"]:
        out.line(f"  problem: {problem}")


def _keys(who: str, row: Mapping[str, Any]) -> tuple[str, ...]:
    """A row's first columns: an analyst's ``actor`` and ``name``, a declaration kind."""
    return (row["actor"], row["name"] or "-") if who == "analyst" else (row["kind"],)


def _heading(who: str) -> tuple[str, ...]:
    return ("actor", "name") if who == "analyst" else ("kind",)


def _basic_rows(who: str, rows: Sequence[Mapping[str, Any]], unit: str, out: Output) -> None:
    """``basic``: what each analyst (or declaration kind) was charged, net of refunds
    (certified: basic composition adds up), and refunded."""
    out.line(f"\nper {'analyst' if who == 'analyst' else 'declaration kind'} ({unit}):")
    table: list[Sequence[str]] = [(*_heading(who), *COUNTS, "charged", "charged δ", "refunded")]
    for a in rows:
        charged, refunded = text_of(a, "charged") or {}, text_of(a, "refunded") or {}
        table.append(
            (
                *_keys(who, a),
                *(str(a[k]) for k in COUNTS),
                out.figure(a["charged"].get(unit, "0"), shown=charged.get(unit)),
                out.figure(a["charged"].get("delta", "0"), shown=charged.get("delta")),
                out.figure(a["refunded"].get(unit, "0"), shown=refunded.get(unit)),
            )
        )
    out.table(table)


def _charged(row: Mapping[str, Any], mode: str, out: Output) -> str:
    """An analyst's net charges in the mode's currency (``ρ=0.015 δ=0``; rdp: a curve; split:
    one currency per sub-budget, in ``--json``)."""
    if mode == "split":
        return "see --json"
    if row.get("curve"):
        return "RDP curve"
    return out.amounts(row.get("charged"), shown=text_of(row, "charged"), symbols=True)


def _attributed_rows(who: str, rows: Sequence[Mapping[str, Any]], mode: str, out: Output) -> None:
    """``zcdp``, ``rdp``, ``gdp``, ``split``: each analyst's (or declaration kind's) charges in
    the mode's currency, and their attribution, the (ε, δ) of those charges alone
    (``attribution``): not certified, and the shares do not add up to the dataset's reading."""
    whose = "analyst" if who == "analyst" else "declaration kind"
    out.line(f"\nper {whose}, attribution (not certified): the (ε, δ) of each {whose}'s own")
    out.line("charges alone; the shares do not add up to the certified reading")
    table: list[Sequence[str]] = [(*_heading(who), *COUNTS, "charged", "attributed ε", "δ")]
    for a in rows:
        attribution = a.get("attribution") or {}
        table.append(
            (
                *_keys(who, a),
                *(str(a[k]) for k in COUNTS),
                _charged(a, mode, out),
                out.figure(attribution.get("epsilon")),
                out.figure(attribution.get("delta")),
            )
        )
    out.table(table)


# ---------------------------------------------------------------------------- wiring
def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``export`` and ``report``."""
    export = sub.add_parser(
        "export", parents=[common], help="stream a dataset's whole ledger to a file (server)"
    )
    export.add_argument("dataset")
    export.add_argument("-o", "--output", required=True)
    export.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        help="default: the one -o's suffix names (.json, .csv), else jsonl (JSON lines, which "
        "`odometer verify` streams)",
    )
    export.set_defaults(run=command(_export))

    report = sub.add_parser(
        "report", parents=[common], help="status, ledger summary and replay verification (server)"
    )
    report.add_argument("dataset")
    report.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="skip the local replay (servers without a report route; the server always replays)",
    )
    report.set_defaults(run=command(_report))
