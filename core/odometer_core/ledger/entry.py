"""One ledger entry: its kinds, its typed shape and the one builder that chains it.

Every entry of a dataset's ledger is made by :func:`next_entry` — by the service when it
appends, by the benchmark generator and by tests — so the payload's fields, their order and the
hash are defined here once. The stored and exported form is :meth:`Entry.to_export` (every
payload field plus ``hash``), hashed as :mod:`odometer_core.ledger.chain` defines.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, TypedDict, Unpack, cast

from odometer_core.accounting.json_types import (
    AmountJSON,
    ConfigJSON,
    DeclarationJSON,
    EntryPayload,
    ExportedEntry,
    GrantQuota,
    LevelPart,
    StateJSON,
)
from odometer_core.ledger.chain import GENESIS_HASH, PAYLOAD_FIELDS, entry_hash


class EntryKind(StrEnum):
    """What an entry records. A stored kind never changes meaning: add a kind, never reuse one."""

    DATASET_CREATED = "dataset_created"
    BUDGET_CHANGED = "budget_changed"
    INVOCATION_ACCEPTED = "invocation_accepted"
    INVOCATION_RESERVED = "invocation_reserved"
    INVOCATION_REJECTED = "invocation_rejected"
    INVOCATION_SETTLED = "invocation_settled"
    INVOCATION_CANCELLED = "invocation_cancelled"
    GRANT_CHANGED = "grant_changed"
    #: a partitioned dataset's curator opened or retired blocks (``request``: the range)
    BLOCKS_OPENED = "blocks_opened"
    BLOCKS_RETIRED = "blocks_retired"
    #: an operator acknowledged that the database lost the entries after this one's
    #: predecessor (a restored backup: ``docs/witness.md``); ``request``: the witnessed head
    #: that was lost (``witnessed_seq``, ``witnessed_hash``, ``database_seq``); ``reason``: the
    #: operator's words. The state does not move: what the lost entries spent is not counted.
    LOSS_ACKNOWLEDGED = "loss_acknowledged"

    @classmethod
    def for_invocation(cls, status: str) -> EntryKind:
        """The kind of an entry that moves an invocation to ``status`` (accepted, reserved,
        rejected, settled, cancelled)."""
        return cls(f"invocation_{status}")


@dataclass(frozen=True, slots=True)
class Entry:
    """A ledger entry as hashed: the fields of :data:`~odometer_core.ledger.chain.PAYLOAD_FIELDS`,
    in
    that order, plus ``hash``. ``org`` and ``quota`` (the upper budget levels) are hashed only
    when not null, so entries written before those levels existed keep their hashes."""

    dataset_id: str
    seq: int
    kind: EntryKind
    invocation_id: str | None
    actor: str
    at: str
    accounting_version: str
    declaration: DeclarationJSON | None
    request: dict[str, Any] | None
    charge: AmountJSON | None
    requested: AmountJSON | None
    refund: AmountJSON | None
    reservation: dict[str, Any] | None
    reason: str | None
    config: ConfigJSON | None
    state: StateJSON
    org: LevelPart | None
    quota: LevelPart | GrantQuota | None
    prev_hash: str
    hash: str

    def payload(self) -> EntryPayload:
        """Every payload field (``kind`` as its plain string), without ``hash``."""
        out = {name: getattr(self, name) for name in PAYLOAD_FIELDS}
        out["kind"] = str(self.kind)
        return cast(EntryPayload, out)

    def to_export(self) -> ExportedEntry:
        """The entry as stored, exported and verified: the payload plus ``hash``."""
        out = cast(ExportedEntry, self.payload())
        out["hash"] = self.hash
        return out


assert tuple(f.name for f in fields(Entry)) == (*PAYLOAD_FIELDS, "hash")


class EntryContent(TypedDict, total=False):
    """What an entry may record besides its kind, actor, time and state (each absent = null):
    the keyword arguments of :func:`next_entry` and of the service's ``append_entry``."""

    invocation_id: str | None
    declaration: DeclarationJSON | None
    request: dict[str, Any] | None
    charge: AmountJSON | None
    requested: AmountJSON | None
    refund: AmountJSON | None
    reservation: dict[str, Any] | None
    reason: str | None
    config: ConfigJSON | None
    org: LevelPart | None
    quota: LevelPart | GrantQuota | None


def next_entry(
    *,
    dataset_id: str,
    head_seq: int,
    head_hash: str | None,
    kind: EntryKind,
    actor: str,
    at: str,
    accounting_version: str,
    state: StateJSON,
    **content: Unpack[EntryContent],
) -> Entry:
    """The entry that follows the head ``(head_seq, head_hash)`` of a dataset's chain (``0`` and
    ``None`` or the genesis hash for the first entry), hashed."""
    exported = next_exported(
        dataset_id=dataset_id,
        head_seq=head_seq,
        head_hash=head_hash,
        kind=kind,
        actor=actor,
        at=at,
        accounting_version=accounting_version,
        state=state,
        **content,
    )
    return Entry(**{**exported, "kind": kind})  # type: ignore[arg-type]


def next_exported(
    *,
    dataset_id: str,
    head_seq: int,
    head_hash: str | None,
    kind: EntryKind,
    actor: str,
    at: str,
    accounting_version: str,
    state: StateJSON,
    **content: Unpack[EntryContent],
) -> ExportedEntry:
    """:func:`next_entry`'s entry as :meth:`Entry.to_export` gives it (the payload in
    :data:`~odometer_core.ledger.chain.PAYLOAD_FIELDS` order, ``kind`` as its string, then
    ``hash``), without building the :class:`Entry`: the write path's form, made on every
    admission."""
    payload: dict[str, Any] = {
        "dataset_id": dataset_id,
        "seq": head_seq + 1,
        "kind": str(kind),
        "invocation_id": content.get("invocation_id"),
        "actor": actor,
        "at": at,
        "accounting_version": accounting_version,
        "declaration": content.get("declaration"),
        "request": content.get("request"),
        "charge": content.get("charge"),
        "requested": content.get("requested"),
        "refund": content.get("refund"),
        "reservation": content.get("reservation"),
        "reason": content.get("reason"),
        "config": content.get("config"),
        "state": state,
        "org": content.get("org"),
        "quota": content.get("quota"),
        "prev_hash": head_hash or GENESIS_HASH,
    }
    payload["hash"] = entry_hash(payload)  # over every field but ``hash``
    return cast(ExportedEntry, payload)
