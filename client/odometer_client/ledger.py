"""Ledger reports, client side.

- :func:`summarize` builds the report (status + ledger summary + replay verdict) when the
  server has no ``GET …/report``.
- :func:`verify_entries` is the offline verifier's replay (``odometer verify``); it needs the
  accounting core (``pip install ./client ./core`` from a checkout of the repository), loaded
  only then.
- Exports are written by the server and saved as received (:mod:`odometer_client.exports`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, NotRequired, TypedDict, cast

from odometer_client.errors import OdometerError
from odometer_client.exports import fmt
from odometer_client.shapes import Reading, State, Status

__all__ = [
    "ActorTotals",
    "ClientReport",
    "LedgerCounts",
    "Verdict",
    "VerifierMissing",
    "summarize",
    "verify_entries",
]

# Entry kinds of the ledger format (a stored kind never changes meaning).
_ACCEPTED, _RESERVED, _REJECTED = (
    "invocation_accepted",
    "invocation_reserved",
    "invocation_rejected",
)
_SETTLED, _CANCELLED = "invocation_settled", "invocation_cancelled"


class Verdict(TypedDict):
    """The offline verifier's replay of a ledger (the accounting core's ``Verdict.to_json``):
    whether every entry checked out, how many there were, the chain's head, the state and
    the certified reading replayed (amounts as decimal text), and what was wrong."""

    ok: bool
    entries: int
    head_hash: str | None
    #: The dataset's state replayed, as its mode's filter writes it.
    state: State | None
    odometer: Reading[str] | None
    problems: list[str]


class Verification(TypedDict):
    """What :func:`summarize` keeps of a :class:`Verdict`."""

    ok: bool
    entries: int
    head_hash: str | None
    problems: list[str]


class LedgerCounts(TypedDict):
    """How many entries the ledger holds, its head, and its entries by kind."""

    entries: int
    last_seq: int
    head_hash: str | None
    kinds: dict[str, int]


class ActorTotals(TypedDict):
    """One actor's decisions and, on scalar budgets, the net ε and δ charged and the ε
    refunded (decimal text)."""

    invocations: int
    rejected: int
    settled: int
    cancelled: int
    epsilon: str
    delta: str
    refunded_epsilon: str


class ClientReport(TypedDict):
    """A report summed up by the client (:func:`summarize`): the dataset's identity and status
    as the server wrote them, the ledger's counts, the ε refunded, how many charges were RDP
    curves (no scalar ε), each actor's totals and, when asked, the replay's verdict."""

    #: ``id``, ``name``, ``mode``, ``relation``, ``organisation`` (``None``: not sent).
    dataset: dict[str, str | None]
    status: Status[str]
    ledger: LedgerCounts
    refunded_epsilon: str
    curve_charges: int
    actors: dict[str, ActorTotals]
    verification: NotRequired[Verification]
    #: Where the report was made, when its reader says (the CLI's ``"client"``).
    source: NotRequired[str]


class VerifierMissing(OdometerError):
    """The offline verifier (the accounting core) is not installed."""

    def __init__(self) -> None:
        super().__init__(
            "the offline verifier is not installed: pip install ./client ./core from a checkout "
            "of the repository (privacy-odometer-core is on no package index)"
        )


def verify_entries(entries: Iterable[Mapping[str, Any]]) -> Verdict:
    """Chain check and full replay through the accounting core (the offline verifier's)."""
    try:
        from odometer_core.ledger.replay import replay
    except ImportError:
        raise VerifierMissing() from None
    return cast(Verdict, replay(entries).to_json())


def _dec(obj: Mapping[str, Any] | None, key: str) -> Decimal | None:
    if not obj or key not in obj or obj[key] is None:
        return None
    return Decimal(str(obj[key]))


def summarize(
    dataset: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], *, verify: bool = True
) -> ClientReport:
    """A report from the dataset document (``Dataset.raw``) and its whole ledger (each entry as
    exported, ``LedgerEntry.raw``: the verifier reads every field of every kind).

    Per actor: invocations, rejections, settlements, cancellations and — on scalar budgets —
    the net ε and δ charged (charges of acceptances and reservations minus refunds).
    """
    kinds = Counter(e["kind"] for e in entries)
    per_actor: dict[str, dict[str, int | Decimal]] = defaultdict(
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
        if kind in (_ACCEPTED, _RESERVED):
            row = per_actor[actor]
            row["invocations"] += 1
            eps, dlt = _dec(e.get("charge"), "epsilon"), _dec(e.get("charge"), "delta")
            if eps is None:
                curve_charges += 1
            else:
                row["epsilon"] += eps
            row["delta"] += dlt or 0
        elif kind == _REJECTED:
            per_actor[actor]["rejected"] += 1
        elif kind in (_SETTLED, _CANCELLED):
            row = per_actor[actor]
            row["settled" if kind == _SETTLED else "cancelled"] += 1
            eps = _dec(e.get("refund"), "epsilon") or Decimal(0)
            row["epsilon"] -= eps
            row["delta"] -= _dec(e.get("refund"), "delta") or Decimal(0)
            row["refunded_epsilon"] += eps
            refunded += eps
    status = dataset.get("status", {})
    report: ClientReport = {
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
            actor: cast(
                ActorTotals, {k: fmt(v) if isinstance(v, Decimal) else v for k, v in row.items()}
            )
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
