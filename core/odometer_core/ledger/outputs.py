"""Match a ledger to published outputs: the auditor's side of settlement from the output.

A settle from the released output records the output's SHA-256 (``request.output_digest``,
:func:`odometer_core.ledger.chain.output_digest`) and the cell the template derived from it
(:func:`odometer_core.accounting.cell_from_output`). Given the published output of an
invocation, :func:`check_outputs` recomputes both from the invocation's declaration, as the
service did, and reports every difference: the output is not the one settled, or the cell
charged is not the output's cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from odometer_core.accounting import DeclarationError, cell_from_output, parse_declaration
from odometer_core.ledger.chain import output_digest
from odometer_core.ledger.entry import EntryKind


def check_outputs(
    entries: Iterable[Mapping[str, Any]], outputs: Mapping[str, Any]
) -> dict[str, list[str]]:
    """The problems found matching each of ``outputs`` (invocation id → published output)
    against its settle entry in ``entries`` (one dataset's ledger, in order; streamed: only the
    entries of the named invocations are kept), by invocation: an empty list is a match."""
    declarations: dict[str, Any] = {}
    settles: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        inv = entry.get("invocation_id")
        if not isinstance(inv, str) or inv not in outputs:
            continue
        kind = entry.get("kind")
        if kind == EntryKind.INVOCATION_RESERVED:
            declarations[inv] = entry.get("declaration")
        elif kind == EntryKind.INVOCATION_SETTLED:
            settles[inv] = entry
    problems: dict[str, list[str]] = {}
    for inv, output in outputs.items():
        settle = settles.get(inv)
        if settle is None or inv not in declarations:
            problems[inv] = [f"output of {inv}: the ledger has no settlement of a reservation"]
            continue
        problems[inv] = [
            f"output of {inv} (seq {settle.get('seq')}): {p}"
            for p in _mismatches(declarations[inv], settle, output)
        ]
    return problems


def _mismatches(declaration: Any, settle: Mapping[str, Any], output: Any) -> list[str]:
    request: Mapping[str, Any] = settle.get("request") or {}
    recorded = request.get("output_digest")
    out: list[str] = []
    try:
        digest = output_digest(output)
    except (TypeError, ValueError) as exc:
        return [f"has no canonical encoding: {exc}"]
    if recorded is None:
        out.append("was settled by naming its cell: the ledger records no output digest")
    elif recorded != digest:
        out.append(f"its SHA-256 is {digest}, the ledger recorded {recorded}")
    try:
        cell = cell_from_output(parse_declaration(declaration), output)
    except DeclarationError as exc:
        return [*out, f"is impossible for the declaration: {exc.detail}"]
    if cell != request.get("cell"):
        out.append(f"lies in cell {cell!r}, the ledger charged {request.get('cell')!r}")
    return out


__all__ = ["check_outputs"]
