"""The witness of ledger heads as a cosigner of signed tree heads, and forks made explicit.

**Cosigning.** The witness of ledger heads (:mod:`odometer_core.ledger.witness`) keeps each
dataset's head outside the database. Given a key of its own (a c2sp.org/tlog-cosignature v1
Ed25519 key, :data:`~odometer_core.ledger.notes.COSIGNATURE_V1`), it also cosigns the
operator's signed tree heads (c2sp.org/tlog-checkpoint notes, :mod:`.receipts`) as a
transparency-log witness does: it cosigns a head only if the operator signed it and, for the
same dataset and epoch, only if an RFC 9162 consistency proof shows it extends the last head it
cosigned (:meth:`CosignedHeads.cosign`, kept in :mod:`odometer_core.ledger.witness` beside the
witness's records and re-exported here). So two heads it cosigned never contradict each other
unless a loss was acknowledged between them (a new witness epoch, which the ledger records).

The directory, beside the witness's (``odometer.cosigned-head.v1``)::

    <witness dir>/cosigned/<quoted id>.json
    {"type": "odometer.cosigned-head.v1", "dataset_id", "epoch", "size", "root" (hex),
     "cosigned_at" (POSIX seconds), "note"}

``note`` is the operator's signed head with the witness's cosignature line appended: what
anyone polling the published heads reads, and what ``odometer verify --cosigner VKEY``
checks. Written as the witness's records are (a lock file, a temporary file fsynced and
renamed).

**Forks.** After a restore the operator may acknowledge a loss: a ``loss_acknowledged``
ledger entry (:class:`~odometer_core.ledger.entry.EntryKind`) follows the database's head and
names the lost range (``database_seq + 1 .. witnessed_seq``), the witnessed head that was lost,
and, when the witness cosigned heads, the last head it cosigned before the loss
(``signed_head``: size and root). New entries then take the lost sequence numbers, so receipts
and heads held from before no longer verify against new heads. :func:`fork_of` reads such an
entry (its hash recomputed from its fields), :func:`receipt_fork` and :func:`head_forks` tell
which acknowledgement explains a receipt or a held head that no longer verifies: the verifier
then says "forked here, acknowledged by … on …", never a pass. Pure: no clock, no database.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odometer_core.accounting.json_types import ForkJSON
from odometer_core.ledger.chain import entry_hash
from odometer_core.ledger.entry import EntryKind
from odometer_core.ledger.merkle import entry_leaf_hash, verify_inclusion
from odometer_core.ledger.notes import Checkpoint, parse_note
from odometer_core.ledger.receipts import ReceiptError, decode_proof, open_head
from odometer_core.ledger.witness import (
    COSIGNED_TYPE,
    Cosigned,
    CosignedHeads,
    CosignRefused,
    cosigner_key,
)

__all__ = [
    "COSIGNED_TYPE",
    "CosignRefused",
    "Cosigned",
    "CosignedHeads",
    "Fork",
    "cosigner_key",
    "export_forks",
    "fork_of",
    "head_forks",
    "proven_forks",
    "receipt_fork",
]

_HEX64 = re.compile(r"[0-9a-f]{64}")


# ---------------------------------------------------------------------------- forks
@dataclass(frozen=True, slots=True)
class Fork:
    """An acknowledged loss, as its ledger entry states it: entries ``lost_from ..
    lost_to`` of the ledger before it were given up, and entry ``seq`` (= ``lost_from``)
    and those after it are another history."""

    dataset_id: str
    seq: int
    entry_hash: str
    at: str
    actor: str
    reason: str
    #: the database's head it follows (the last entry kept)
    kept: int
    #: the witnessed head that was lost: its seq and hash
    witnessed_seq: int
    witnessed_hash: str
    #: the last head the witness cosigned before the loss (size, root), when it cosigned
    signed_head: tuple[int, bytes] | None

    @property
    def lost_from(self) -> int:
        return self.kept + 1

    def to_json(self) -> ForkJSON:
        signed = self.signed_head
        return {
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "reason": self.reason,
            "lost": [self.lost_from, self.witnessed_seq],
            "witnessed_hash": self.witnessed_hash,
            "signed_head": None if signed is None else {"size": signed[0], "root": signed[1].hex()},
        }

    def says(self) -> str:
        """The acknowledgement in words."""
        signed = ""
        if self.signed_head is not None:
            size, root = self.signed_head
            signed = (
                f"; the last head the witness cosigned before it: size {size}, root "
                f"{root.hex()[:16]}…"
            )
        return (
            f"forked at entry {self.seq}: the operator acknowledged the loss of entries "
            f"{self.lost_from}..{self.witnessed_seq} on {self.at} (by {self.actor}: "
            f"{self.reason!r}){signed}"
        )


def _int(value: object, what: str) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"a loss_acknowledged entry's {what} is an integer >= 0")
    return value


def signed_head_of(request: Mapping[str, Any]) -> tuple[int, bytes] | None:
    """The ``signed_head`` an acknowledgement names (``None`` if it names none; entries
    written before it was recorded name none); ``ValueError`` if malformed."""
    doc = request.get("signed_head")
    if doc is None:
        return None
    if not isinstance(doc, Mapping) or set(doc) != {"size", "root"}:
        raise ValueError("a loss_acknowledged entry's signed_head is {size, root}")
    root = doc["root"]
    if not isinstance(root, str) or _HEX64.fullmatch(root) is None:
        raise ValueError("a loss_acknowledged entry's signed_head root is 64 hex digits")
    return _int(doc["size"], "signed_head size"), bytes.fromhex(root)


def fork_of(entry: Mapping[str, Any]) -> Fork:
    """The fork a ``loss_acknowledged`` entry states; ``ValueError`` if it is not one or its
    ``hash`` is not its fields' (the caller then proves that hash in a signed head)."""
    if entry.get("kind") != EntryKind.LOSS_ACKNOWLEDGED:
        raise ValueError(f"not a loss_acknowledged entry: kind {entry.get('kind')!r}")
    if entry.get("hash") != entry_hash(entry):
        raise ValueError(f"entry {entry.get('seq')}: its hash is not its fields'")
    request: Mapping[str, Any] = entry.get("request") or {}
    seq = _int(entry.get("seq"), "seq")
    kept = _int(request.get("database_seq"), "database_seq")
    if kept != seq - 1:
        raise ValueError("a loss_acknowledged entry follows the database's head")
    return Fork(
        dataset_id=str(entry.get("dataset_id")),
        seq=seq,
        entry_hash=str(entry["hash"]),
        at=str(entry.get("at")),
        actor=str(entry.get("actor")),
        reason=str(entry.get("reason") or ""),
        kept=kept,
        witnessed_seq=_int(request.get("witnessed_seq"), "witnessed_seq"),
        witnessed_hash=str(request.get("witnessed_hash")),
        signed_head=signed_head_of(request),
    )


def receipt_fork(seq: int, at: str, forks: Iterable[Fork]) -> Fork | None:
    """The acknowledgement that gave up the entry a receipt names (entry ``seq``, written at
    ``at``): the first one written after it whose kept prefix ends before ``seq``; ``None``
    when no acknowledgement explains it (the receipt must then verify, or fail)."""
    after = [f for f in forks if f.kept < seq and f.at > at]
    return min(after, key=lambda f: (f.at, f.seq)) if after else None


def head_forks(size: int, root: bytes, forks: Iterable[Fork]) -> list[Fork]:
    """The acknowledgements that explain why a head held earlier (``size``, ``root``) is not
    a prefix of a newer one: every one whose kept prefix ends before ``size`` (a head carries
    no time, so each candidate is named; one naming exactly this head as the last cosigned
    before the loss first)."""
    found = [f for f in forks if f.kept < size]
    return sorted(found, key=lambda f: (f.signed_head != (size, root), f.seq))


def checkpoint_of(note: str) -> Checkpoint:
    """The checkpoint of a note's text, nothing verified."""
    return Checkpoint.parse(parse_note(note).text)


def proven_forks(doc: Mapping[str, Any], public_key: Any) -> list[Fork]:
    """The acknowledgements of a forks document (``GET …/ledger/forks``: a signed head
    ``note`` and each ``loss_acknowledged`` entry with its inclusion ``proof`` in it), each
    proven in the operator's signed head; ``ValueError`` naming the first that is not."""
    try:
        head = open_head(str(doc["note"]), public_key)
    except (KeyError, ReceiptError) as error:
        raise ValueError(f"the forks document's head: {error}") from None
    out: list[Fork] = []
    for item in doc.get("forks") or []:
        fork = fork_of(item["entry"])
        if fork.dataset_id != head.dataset_id:
            raise ValueError(f"entry {fork.seq} is dataset {fork.dataset_id}'s, not the head's")
        leaf = entry_leaf_hash(fork.entry_hash)
        proof = decode_proof(list(item.get("proof") or []))
        if fork.seq > head.size or not verify_inclusion(
            leaf, fork.seq - 1, head.size, proof, head.root
        ):
            raise ValueError(
                f"the acknowledgement at entry {fork.seq} is not in the signed head of size "
                f"{head.size}"
            )
        out.append(fork)
    return out


def export_forks(entries: Iterable[Mapping[str, Any]]) -> list[Fork]:
    """The acknowledgements in an export (whose chain and signed end the verifier checks)."""
    return [fork_of(e) for e in entries if e.get("kind") == EntryKind.LOSS_ACKNOWLEDGED]
