"""Ledger exports and reports, client side.

- :func:`write_export` writes entries as ``json`` (the server's page document with every
  entry), ``jsonl`` (one entry per line) or ``csv`` (the server's columns and cell encoding).
- :func:`load_entries` reads any of the three back; verification reuses the service's own
  offline verifier (:func:`app.services.replay.replay`, the one behind ``odometer verify``).
- :func:`summarize` builds the report (status + ledger summary + replay verdict) when the
  server has no ``GET …/report``.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import IO, Any, Literal

from app.accounting.exact import fmt
from app.ledger_chain import PAYLOAD_FIELDS

ExportFormat = Literal["json", "jsonl", "csv"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("json", "jsonl", "csv")
CSV_COLUMNS = (*PAYLOAD_FIELDS, "hash")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return _compact(value)
    return str(value)


def write_export(
    dataset_id: str, entries: Iterable[Mapping[str, Any]], out: IO[str], format: ExportFormat
) -> int:
    """Stream ``entries`` to ``out``; returns how many were written."""
    count = 0
    if format == "jsonl":
        for entry in entries:
            out.write(_compact(entry) + "\n")
            count += 1
    elif format == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for entry in entries:
            writer.writerow([_csv_cell(entry.get(c)) for c in CSV_COLUMNS])
            count += 1
    elif format == "json":
        out.write(f'{{"dataset_id":{_compact(dataset_id)},"entries":[')
        for entry in entries:
            out.write(("," if count else "") + "\n" + _compact(entry))
            count += 1
        out.write("\n]}\n")
    else:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}")
    return count


def jsonl_entries(text: str) -> list[dict[str, Any]] | None:
    """The entries of a JSON-lines export, or ``None`` if ``text`` is not one."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not all(line.lstrip().startswith("{") for line in lines):
        return None
    try:
        rows = [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        return None  # a JSON document spread over lines, not JSON lines
    if all(isinstance(r, dict) and "seq" in r and "hash" in r for r in rows):
        return rows
    return None


def load_entries(text: str) -> list[dict[str, Any]]:
    """Entries of a JSON, JSONL or CSV export (what ``odometer verify`` reads)."""
    from app.cli import load_export

    return load_export(text)


def verify_entries(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Chain check and full replay through the accounting core (the service's verifier)."""
    from app.services.replay import replay

    return replay(entries).to_json()


def _dec(obj: Mapping[str, Any] | None, key: str) -> Decimal | None:
    if not obj or key not in obj or obj[key] is None:
        return None
    return Decimal(str(obj[key]))


def summarize(
    dataset: Mapping[str, Any], entries: list[dict[str, Any]], *, verify: bool = True
) -> dict[str, Any]:
    """A report from the dataset document and its whole ledger.

    Per actor: invocations, rejections, settlements, cancellations and — on scalar ledgers —
    the net ε and δ charged (charges of acceptances and reservations minus refunds).
    """
    kinds = Counter(e["kind"] for e in entries)
    per_actor: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "invocations": 0,
            "rejected": 0,
            "settled": 0,
            "cancelled": 0,
            "epsilon": Decimal(0),
            "delta": Decimal(0),
            "refunded_epsilon": Decimal(0),
        }
    )
    curve_charges = 0
    refunded = Decimal(0)
    for e in entries:
        kind, actor = e["kind"], e["actor"]
        if kind in ("invocation_accepted", "invocation_reserved"):
            row = per_actor[actor]
            row["invocations"] += 1
            eps, dlt = _dec(e.get("charge"), "epsilon"), _dec(e.get("charge"), "delta")
            if eps is None:
                curve_charges += 1
            else:
                row["epsilon"] += eps
            row["delta"] += dlt or 0
        elif kind == "invocation_rejected":
            per_actor[actor]["rejected"] += 1
        elif kind in ("invocation_settled", "invocation_cancelled"):
            row = per_actor[actor]
            row["settled" if kind == "invocation_settled" else "cancelled"] += 1
            eps = _dec(e.get("refund"), "epsilon") or Decimal(0)
            row["epsilon"] -= eps
            row["delta"] -= _dec(e.get("refund"), "delta") or Decimal(0)
            row["refunded_epsilon"] += eps
            refunded += eps
    status = dataset.get("status", {})
    report: dict[str, Any] = {
        "dataset": {k: dataset.get(k) for k in ("id", "name", "mode", "relation", "organisation")},
        "status": status,
        "ledger": {
            "entries": len(entries),
            "last_seq": entries[-1]["seq"] if entries else 0,
            "head_hash": entries[-1]["hash"] if entries else None,
            "kinds": dict(sorted(kinds.items())),
        },
        "refunded_epsilon": fmt(refunded),
        "curve_charges": curve_charges,
        "actors": {
            actor: {k: fmt(v) if isinstance(v, Decimal) else v for k, v in row.items()}
            for actor, row in sorted(per_actor.items())
        },
    }
    if verify:
        verdict = verify_entries(entries)
        report["verification"] = {
            "ok": verdict["ok"],
            "entries": verdict["entries"],
            "head_hash": verdict["head_hash"],
            "problems": verdict["problems"],
        }
    return report
