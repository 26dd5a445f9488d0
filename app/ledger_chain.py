"""The ledger's canonical encoding and hash chain (SERVICE.md §2).

This module is deliberately small and free of database and web imports: the offline verifier
(``odometer verify``) and the service share it, so an export is checked with exactly the
encoding it was written with.

An entry is a JSON object with the fields in :data:`PAYLOAD_FIELDS` plus ``hash``, where

    hash = SHA-256( canonical_bytes(entry without "hash") )
    canonical_bytes(x) = json.dumps(x, sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False).encode("utf-8")

and ``prev_hash`` is the previous entry's ``hash`` (:data:`GENESIS_HASH` for ``seq`` 1). Every
amount inside an entry is a decimal *string* (the accounting core's ``fmt``); binary floats are
refused by :func:`canonical_bytes` because their text is not a stable part of the contract.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

GENESIS_HASH: Final = "0" * 64

#: Every field of an entry except ``hash``, in export (CSV column) order.
PAYLOAD_FIELDS: Final[tuple[str, ...]] = (
    "dataset_id",
    "seq",
    "kind",
    "invocation_id",
    "actor",
    "at",
    "accounting_version",
    "declaration",
    "request",
    "charge",
    "requested",
    "refund",
    "reservation",
    "reason",
    "config",
    "state",
    "org",
    "quota",
    "prev_hash",
)

#: Fields added with organisations (revision 0002): hashed only when not null, so entries
#: written before they existed keep their hashes.
OPTIONAL_FIELDS: Final[frozenset[str]] = frozenset({"org", "quota"})

ENTRY_KINDS: Final[tuple[str, ...]] = (
    "dataset_created",
    "budget_changed",
    "invocation_accepted",
    "invocation_reserved",
    "invocation_rejected",
    "invocation_settled",
    "invocation_cancelled",
    "grant_changed",
)


def _check_no_floats(value: Any, path: str = "$") -> None:
    if isinstance(value, float):
        raise TypeError(f"{path}: binary floats are not allowed in ledger entries, use strings")
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{path}: keys must be strings")
            _check_no_floats(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_no_floats(v, f"{path}[{i}]")


def canonical_bytes(value: Any) -> bytes:
    """The canonical UTF-8 JSON encoding used for hashing (sorted keys, no whitespace)."""
    _check_no_floats(value)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def entry_hash(entry: Mapping[str, Any]) -> str:
    """SHA-256 hex digest over every field of ``entry`` except ``hash``."""
    payload = {
        k: v
        for k, v in entry.items()
        if k != "hash" and not (k in OPTIONAL_FIELDS and v is None)
    }
    return hashlib.sha256(canonical_bytes(payload)).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """One defect found while walking the chain (``seq`` as stored, or the position)."""

    position: int
    seq: object
    problem: str


class ChainWalker:
    """:func:`verify_chain` one entry at a time, so a long export is checked while it streams.

    ``prev_hash``, ``position`` and ``dataset`` let a walk resume after entries already checked
    (the hash of the last one, how many there were, their dataset); the defaults start at
    genesis.
    """

    __slots__ = ("dataset", "position", "prev_hash")

    def __init__(
        self, prev_hash: str = GENESIS_HASH, position: int = 0, dataset: object = None
    ) -> None:
        self.prev_hash = prev_hash
        self.position = position
        self.dataset = dataset

    def check(self, entry: Mapping[str, Any]) -> list[ChainProblem]:
        """The defects of the next entry (empty if it links and hashes correctly)."""
        self.position += 1
        position = self.position
        problems: list[ChainProblem] = []
        seq = entry.get("seq")
        missing = [
            f for f in (*PAYLOAD_FIELDS, "hash") if f not in entry and f not in OPTIONAL_FIELDS
        ]
        if missing:
            problems.append(ChainProblem(position, seq, f"missing field(s): {', '.join(missing)}"))
        if seq != position:
            problems.append(ChainProblem(position, seq, f"seq {seq!r} where {position} expected"))
        if position == 1:
            self.dataset = entry.get("dataset_id")
        elif entry.get("dataset_id") != self.dataset:
            problems.append(ChainProblem(position, seq, "entry belongs to another dataset"))
        if entry.get("prev_hash") != self.prev_hash:
            problems.append(
                ChainProblem(position, seq, "prev_hash does not link to the previous entry")
            )
        try:
            recomputed = entry_hash(entry)
        except (TypeError, ValueError) as exc:
            problems.append(ChainProblem(position, seq, f"cannot encode entry: {exc}"))
            recomputed = ""
        if entry.get("hash") != recomputed:
            problems.append(ChainProblem(position, seq, "hash does not match the entry's content"))
        self.prev_hash = str(entry.get("hash"))
        return problems


def verify_chain(entries: Iterable[Mapping[str, Any]]) -> list[ChainProblem]:
    """Check that entries form one gapless chain from genesis: fields present, ``seq`` = 1, 2,
    …, each ``prev_hash`` the previous ``hash``, each ``hash`` recomputed, one dataset."""
    walker = ChainWalker()
    problems: list[ChainProblem] = []
    for entry in entries:
        problems.extend(walker.check(entry))
    return problems
