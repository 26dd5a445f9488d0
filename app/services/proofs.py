"""Proofs over a dataset's ledger: an entry's inclusion in the Merkle tree of its first
``size`` entries, and the tree of ``from`` entries a prefix of the tree of ``to``
(RFC 9162 sections 2.1.3 and 2.1.4; the tree is :mod:`odometer_core.ledger.merkle`'s, its leaf
``i`` the entry of ``seq = i + 1``).

Who may read a ledger may read its proofs (:func:`app.services._aggregate.visible_dataset`).
The service keeps the tree's frontier beside the head (``datasets.merkle_json``), not its
inner nodes: a proof reads the hashes of the entries ``1..size`` in one query and hashes them
again, ``O(size)``: 0.55 to 0.8 s at 10^5 entries on a loaded two-core development machine,
half reading the hashes and half hashing them (:class:`_Levels`). Stored subtree
roots would make it ``O(log size)`` reads (``docs/ledger.md``, *Not built yet*). A proof at the
head's size is checked against the stored frontier's root before it is served.
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import sha256 as _sha256

from app.db.uow import UnitOfWork
from app.services._aggregate import visible_dataset
from app.services.errors import InvalidQuery
from app.services.principals import Principal
from odometer_core.ledger.merkle import Frontier, TreeReader


@dataclass(frozen=True, slots=True)
class TreeHead:
    """The tree of the first ``size`` entries and its root (MTH, 32 bytes)."""

    size: int
    root: bytes


@dataclass(frozen=True, slots=True)
class InclusionProof:
    dataset_id: str
    head_seq: int
    seq: int
    entry_hash: str
    tree: TreeHead
    #: RFC 9162 ``PATH(seq - 1, D[size])``, bottom-up
    path: list[bytes]


@dataclass(frozen=True, slots=True)
class ConsistencyProof:
    dataset_id: str
    head_seq: int
    old: TreeHead
    new: TreeHead
    #: RFC 9162 ``PROOF(old.size, D[new.size])``
    path: list[bytes]


class _Levels:
    """Every perfect subtree's root of the tree over ``hashes`` (entry hashes, hex), level by
    level, hashed in one pass (``2n`` hashes for ``n`` entries)."""

    def __init__(self, hashes: list[str]) -> None:
        leaf = b"\x00"
        level = [_sha256(leaf + bytes.fromhex(h)).digest() for h in hashes]
        self.levels = [level]
        while len(level) > 1:
            it = iter(level)
            level = [
                _sha256(b"\x01" + left + right).digest()
                for left, right in zip(it, it, strict=False)
            ]
            self.levels.append(level)

    def node(self, level: int, index: int) -> bytes:
        try:
            return self.levels[level][index]
        except IndexError:
            raise LookupError(f"no complete subtree at level {level}, index {index}") from None


class _Tree:
    """The tree of a dataset's first ``size`` entries, read in one query."""

    def __init__(self, uow: UnitOfWork, dataset_id: str, size: int, frontier: Frontier | None):
        hashes = uow.ledger.hashes(dataset_id, size) if size else []
        if len(hashes) != size:
            raise RuntimeError(f"dataset '{dataset_id}' has {len(hashes)} entries up to {size}")
        self.hashes = hashes
        self.reader = TreeReader(nodes=_Levels(hashes))
        self.head = TreeHead(size, self.reader.root(size))
        if frontier is not None and frontier.size == size and frontier.root() != self.head.root:
            raise RuntimeError(
                f"dataset '{dataset_id}': the stored Merkle frontier's root differs from its "
                f"entries' tree at size {size}"
            )


def _frontier(doc: object) -> Frontier | None:
    return Frontier.from_json(doc) if isinstance(doc, dict) else None


def _within(name: str, value: int, head: int, what: str) -> None:
    if value > head:
        raise InvalidQuery(
            f"'{name}' is {value} but the ledger's head is seq {head}: {what}", field=name
        )


def inclusion_proof(
    uow: UnitOfWork, principal: Principal, dataset_id: str, seq: int, size: int | None
) -> InclusionProof:
    """The inclusion proof of entry ``seq`` in the tree of the first ``size`` entries (the
    head's when ``None``); :class:`InvalidQuery` unless ``1 <= seq <= size <= head``."""
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        head = ds.last_seq
        size = head if size is None else size
        _within("size", size, head, "a tree holds at most the entries written")
        if seq > size:
            raise InvalidQuery(
                f"entry {seq} is not in the tree of the first {size} entries: 'seq' is at most "
                "'size'",
                field="seq",
            )
        tree = _Tree(uow, ds.id, size, _frontier(ds.merkle_json))
    return InclusionProof(
        dataset_id=ds.id,
        head_seq=head,
        seq=seq,
        entry_hash=tree.hashes[seq - 1],
        tree=tree.head,
        path=tree.reader.inclusion_proof(seq - 1, size),
    )


def consistency_proof(
    uow: UnitOfWork, principal: Principal, dataset_id: str, old: int, new: int | None
) -> ConsistencyProof:
    """The consistency proof from the tree of the first ``old`` entries to the tree of the
    first ``new`` (the head's when ``None``); :class:`InvalidQuery` unless
    ``old <= new <= head``."""
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        head = ds.last_seq
        new = head if new is None else new
        _within("to", new, head, "a tree holds at most the entries written")
        if old > new:
            raise InvalidQuery(
                f"'from' ({old}) is larger than 'to' ({new}): a consistency proof goes from an "
                "older (smaller) tree to a newer one",
                field="from",
            )
        tree = _Tree(uow, ds.id, new, _frontier(ds.merkle_json))
    return ConsistencyProof(
        dataset_id=ds.id,
        head_seq=head,
        old=TreeHead(old, tree.reader.root(old)),
        new=tree.head,
        path=tree.reader.consistency_proof(old, new),
    )
