"""Ledger exports and reports, client side.

- :func:`write_export` writes entries as ``json`` (the server's page document with every
  entry), ``jsonl`` (one entry per line) or ``csv`` (the server's columns and cell encoding).
- :func:`load_entries` reads any of the three back; verification is the offline verifier
  (:func:`app.ledger.replay.replay`, the one behind ``odometer verify``).
- :func:`summarize` builds the report (status + ledger summary + replay verdict) when the
  server has no ``GET …/report``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from app.accounting.exact import fmt
from app.ledger import EntryKind
from app.ledger.formats import EXPORT_FORMATS, ExportFormat, load_export, write_export
from app.ledger.replay import replay

__all__ = [
    "EXPORT_FORMATS",
    "ExportFormat",
    "load_entries",
    "summarize",
    "verify_entries",
    "write_export",
]


def load_entries(text: str) -> list[dict[str, Any]]:
    """Entries of a JSON, JSONL or CSV export (what ``odometer verify`` reads)."""
    return load_export(text)


def verify_entries(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Chain check and full replay through the accounting core (the offline verifier's)."""
    return replay(entries).to_json()


def _dec(obj: Mapping[str, Any] | None, key: str) -> Decimal | None:
    if not obj or key not in obj or obj[key] is None:
        return None
    return Decimal(str(obj[key]))


def summarize(
    dataset: Mapping[str, Any], entries: list[dict[str, Any]], *, verify: bool = True
) -> dict[str, Any]:
    """A report from the dataset document and its whole ledger.

    Per actor: invocations, rejections, settlements, cancellations and — on scalar budgets —
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
        if kind in (EntryKind.INVOCATION_ACCEPTED, EntryKind.INVOCATION_RESERVED):
            row = per_actor[actor]
            row["invocations"] += 1
            eps, dlt = _dec(e.get("charge"), "epsilon"), _dec(e.get("charge"), "delta")
            if eps is None:
                curve_charges += 1
            else:
                row["epsilon"] += eps
            row["delta"] += dlt or 0
        elif kind == EntryKind.INVOCATION_REJECTED:
            per_actor[actor]["rejected"] += 1
        elif kind in (EntryKind.INVOCATION_SETTLED, EntryKind.INVOCATION_CANCELLED):
            row = per_actor[actor]
            row["settled" if kind == EntryKind.INVOCATION_SETTLED else "cancelled"] += 1
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
