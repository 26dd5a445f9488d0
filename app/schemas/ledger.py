"""Ledger export documents."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonSchemaValue

from app.schemas._types import JSONObject
from app.schemas.shown import AmountText
from odometer_core.ledger import EntryKind as StoredKind

EntryKind = Literal[
    "dataset_created",
    "budget_changed",
    "invocation_accepted",
    "invocation_reserved",
    "invocation_rejected",
    "invocation_settled",
    "invocation_cancelled",
    "grant_changed",
    "blocks_opened",
    "blocks_retired",
    "loss_acknowledged",
]
# a literal (not the enum) keeps the OpenAPI document's inline enum; it must list every kind
assert set(get_args(EntryKind)) == {str(k) for k in StoredKind}


class LedgerEntryOut(BaseModel):
    """One entry exactly as hashed, plus its ``hash`` (SHA-256 of its canonical JSON)."""

    dataset_id: str
    seq: int
    kind: EntryKind
    invocation_id: str | None
    actor: str
    at: str
    accounting_version: str
    declaration: JSONObject | None
    request: JSONObject | None
    charge: JSONObject | None
    requested: JSONObject | None
    refund: JSONObject | None
    reservation: JSONObject | None
    reason: str | None
    config: JSONObject | None
    state: JSONObject
    org: JSONObject | None = None
    quota: JSONObject | None = None
    prev_hash: str
    hash: str


def _page_or_export(schema: JsonSchemaValue) -> None:
    """An export file (``export=true``) is ``{dataset_id, entries}``: a page's cursor fields
    are documented as a page's only."""
    schema["required"] = ["dataset_id", "entries"]


class LedgerPageOut(BaseModel):
    """A page of the ledger; pass ``next_after_seq`` as ``after_seq`` for the next one. An
    export file (``export=true``) has ``dataset_id`` and ``entries`` only (its head is the
    ``Ledger-Head-Seq`` header)."""

    model_config = ConfigDict(json_schema_extra=_page_or_export)

    dataset_id: str
    head_seq: int = Field(description="a page's: the ledger's last seq (not in an export file)")
    entries: list[LedgerEntryOut]
    next_after_seq: int | None = Field(
        description="a page's: the after_seq of the next page, null on the last (not in an "
        "export file)"
    )
    shown: dict[str, dict[str, AmountText]] | None = Field(
        default=None,
        description="a page's: its entries' charge and refund as pages print them, by seq "
        "(an entry is hashed as it is, so its text sits here): each scalar unit rounded by "
        "the core's one rule for display to 6 significant digits, the charge up and the "
        "refund down; an entry with neither is left out (not in an export file)",
    )


def ledger_time(value: datetime) -> str:
    """A query time in the ledger's fixed-width UTC text (naive times are UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class TreeHeadOut(BaseModel):
    """The Merkle tree (RFC 9162) of the ledger's first ``size`` entries: leaf ``i`` is the
    entry of ``seq = i + 1``, its leaf hash ``SHA-256(0x00 || entry hash bytes)``."""

    size: int = Field(description="how many entries the tree holds (seq 1 to size)")
    root: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="the tree's root (MTH), 64 lowercase hex digits"
    )


class InclusionProofOut(BaseModel):
    """An entry's inclusion proof: RFC 9162's audit path ``PATH(seq - 1, D[size])``, checked by
    section 2.1.3.2's algorithm from the entry's leaf hash to ``tree.root``
    (``odometer_core.ledger.merkle.verify_inclusion``, leaf index ``seq - 1``)."""

    dataset_id: str
    head_seq: int = Field(description="the ledger's last seq when the proof was made")
    seq: int
    entry_hash: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="the entry's hash (the leaf, as 32 bytes)"
    )
    tree: TreeHeadOut
    proof: list[str] = Field(description="the audit path, bottom-up, 64 hex digits each")


class ConsistencyProofOut(BaseModel):
    """A consistency proof: RFC 9162's ``PROOF(from, D[to])``, which shows the tree of the first
    ``from`` entries a prefix of the tree of the first ``to``, checked by section 2.1.4.2's
    algorithm (``odometer_core.ledger.merkle.verify_consistency``)."""

    dataset_id: str
    head_seq: int = Field(description="the ledger's last seq when the proof was made")
    old: TreeHeadOut = Field(description="the tree of the first `from` entries")
    new: TreeHeadOut = Field(description="the tree of the first `to` entries")
    proof: list[str] = Field(description="the proof's hashes, in RFC 9162's order, 64 hex digits")
