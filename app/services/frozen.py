"""What a read of a frozen dataset says about it: ``status.frozen``.

A dataset the witness froze (its ledger in the database behind, or beside, the head recorded
outside it: ``app.writepath.witness``, ``docs/witness.md``) still serves reads, but its reading is
the database's, which may have lost entries: the budget shown can be below what was released.
Its status says so, with the refusal a write would get, so that neither a curator nor a
dashboard takes a rolled-back reading for the truth.
"""

from __future__ import annotations

from typing import TypedDict

from app.db.uow import UnitOfWork
from app.services._aggregate import behind_witness
from app.writepath import write_path

#: What the reading shown is worth, by the reason a dataset is frozen.
_READING = {
    "behind": "the reading shown is the database's, which lost entries the witness holds: what "
    "was released can be more",
    "forked": "the reading shown is the database's, whose history differs from the witnessed "
    "one: what was released can be more",
    "organisation": "its organisation's cap may have been rolled back with another dataset's "
    "ledger",
    "unwitnessed": "its last heads could not be recorded outside the database",
}


class FrozenStatus(TypedDict):
    """``status.frozen`` of a dataset behind its witness (:func:`frozen_status`)."""

    reason: str
    witnessed_seq: int
    database_seq: int
    sibling: str | None
    reading: str
    detail: str


def frozen_status(uow: UnitOfWork, dataset_id: str) -> FrozenStatus | None:
    """``status.frozen`` of a dataset: ``None`` while it serves writes (or no witness is
    kept); else why it is frozen, both heads, what the reading is worth and what an operator
    can do (the text of the 409 ``LedgerBehindWitness`` a write gets)."""
    guard = write_path(uow.database).witness
    behind = None if guard is None else guard.frozen(dataset_id)
    if behind is None:
        return None
    return {
        "reason": behind.reason,
        "witnessed_seq": behind.witnessed_seq,
        "database_seq": behind.database_seq,
        "sibling": behind.sibling,
        "reading": _READING.get(behind.reason, "the reading shown may be rolled back"),
        "detail": str(behind_witness(behind)),
    }
