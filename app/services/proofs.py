"""Proofs over a dataset's ledger: an entry's inclusion in the Merkle tree of its first
``size`` entries, and the tree of ``from`` entries a prefix of the tree of ``to``
(RFC 9162 sections 2.1.3 and 2.1.4; the tree is :mod:`odometer_core.ledger.merkle`'s, its leaf
``i`` the entry of ``seq = i + 1``).

Who may read a ledger may read its proofs (:func:`app.services._aggregate.visible_dataset`).

**Stored subtree roots.** Beside the frontier kept with the head (``datasets.merkle_json``),
``merkle_nodes`` (revision 0013) holds the root of every complete perfect subtree at least
:data:`STORED_HEIGHT` levels high (one per :data:`BLOCK` entries, and as many again above:
about ``n / 128`` rows, 7,800 for 10^6 entries). A proof asks for ``O(log n)`` of them and
reads at most two runs of :data:`BLOCK` entries' hashes below them (the proved entry's and the
right border's), in two queries (:func:`odometer_core.ledger.merkle.plan_reads`): about a
millisecond of database and a few hundred hashes whatever the ledger's length
(``benchmarks/RESULTS.md``, *Proofs at 10^6 entries*).

The rows are not written by the write path (it keeps its CPU): they are **caught up** by the
proof or signed head that needs them (:func:`catch_up`, in a short write transaction of its
own, from the entries written since the last stored block: amortised two hashes per entry),
and built for existing ledgers by revision 0013. They are derived from the ledger, which is
append-only, so they never change; a database restored from a backup restores them with the
entries they were built from. Every proof is checked before it is served: it must verify
against the root served with it, and at the head's size that root must be the stored
frontier's (a stored root changed in place is refused, 500, rather than served).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from sqlalchemy import and_, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import Dataset, LedgerEntry, MerkleNode
from app.db.uow import UnitOfWork
from app.services._aggregate import visible_dataset
from app.services.errors import InvalidQuery
from app.services.principals import Principal
from odometer_core.ledger.merkle import (
    Frontier,
    StoredTree,
    TreeReader,
    completed_subtrees,
    entry_leaf_hash,
    plan_reads,
    verify_consistency,
    verify_inclusion,
)

#: The lowest level whose subtree roots are stored: one row per 2^8 = 256 entries. Lower, the
#: table grows (2^h entries per row) and a catch-up writes more often; higher, a proof hashes
#: up to 2^(h + 2) leaves again (1,024 at 8: about 0.5 ms).
STORED_HEIGHT: Final = 8
BLOCK: Final = 1 << STORED_HEIGHT
#: At most this many entries are read per catch-up query (a ledger never caught up is built
#: in runs; revision 0013 builds every existing one).
CATCH_UP_RUN: Final = 1 << 16

T = TypeVar("T")


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


# ---------------------------------------------------------------------------- stored roots
def stored_blocks(session: Session, dataset_id: str) -> int:
    """How many :data:`BLOCK`-entry subtrees of the dataset's tree have their roots stored (they
    are stored in order, so the entries ``1..stored_blocks * BLOCK`` are covered)."""
    last = session.scalar(
        select(func.max(MerkleNode.idx)).where(
            MerkleNode.dataset_id == dataset_id, MerkleNode.level == STORED_HEIGHT
        )
    )
    return 0 if last is None else last + 1


def _read_nodes(
    session: Session, dataset_id: str, keys: Iterable[tuple[int, int]]
) -> dict[tuple[int, int], bytes]:
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = session.execute(
        select(MerkleNode.level, MerkleNode.idx, MerkleNode.hash).where(
            MerkleNode.dataset_id == dataset_id,
            or_(*(and_(MerkleNode.level == lv, MerkleNode.idx == ix) for lv, ix in wanted)),
        )
    )
    return {(lv, ix): bytes(h) for lv, ix, h in rows}


def _read_hashes(
    session: Session, dataset_id: str, ranges: Sequence[tuple[int, int]]
) -> dict[int, str]:
    """The entry hashes of the leaves in ``ranges`` (``[start, end)``, 0-based leaves), by
    leaf index."""
    if not ranges:
        return {}
    rows = session.execute(
        select(LedgerEntry.seq, LedgerEntry.hash).where(
            LedgerEntry.dataset_id == dataset_id,
            or_(*(LedgerEntry.seq.between(start + 1, end) for start, end in ranges)),
        )
    )
    return {seq - 1: entry_hash for seq, entry_hash in rows}


def _stored_frontier(session: Session, dataset_id: str, blocks: int) -> Frontier:
    """The tree's frontier at ``blocks * BLOCK`` entries, from the stored roots."""
    size = blocks * BLOCK
    keys, start = [], 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            keys.append((level, start >> level))
            start += 1 << level
    nodes = _read_nodes(session, dataset_id, keys)
    return Frontier.at(size, StoredTree(STORED_HEIGHT, nodes, {}))


def _insert_nodes(session: Session, dataset_id: str, rows: list[tuple[int, int, bytes]]) -> None:
    """Insert stored roots; one another catch-up already wrote is skipped (they are equal)."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    for at in range(0, len(rows), 5_000):
        session.execute(
            insert(MerkleNode).on_conflict_do_nothing(),
            [
                {"dataset_id": dataset_id, "level": lv, "idx": ix, "hash": h}
                for lv, ix, h in rows[at : at + 5_000]
            ],
        )


def catch_up(session: Session, dataset_id: str, up_to_seq: int) -> int:
    """Store the roots of every complete :data:`BLOCK`-aligned subtree of the dataset's first
    ``up_to_seq`` entries that is not stored yet (in the caller's write transaction); returns
    how many rows it added. Reads the entries' hashes since the last stored block once."""
    blocks = stored_blocks(session, dataset_id)
    target = up_to_seq // BLOCK
    if target <= blocks:
        return 0
    frontier = _stored_frontier(session, dataset_id, blocks)
    added = 0
    while frontier.size < target * BLOCK:
        end = min(target * BLOCK, frontier.size + CATCH_UP_RUN)
        hashes = _read_hashes(session, dataset_id, [(frontier.size, end)])
        if len(hashes) != end - frontier.size:
            raise RuntimeError(
                f"dataset '{dataset_id}' has {len(hashes)} entries in {frontier.size + 1}..{end}"
            )
        leaves = [entry_leaf_hash(hashes[i]) for i in range(frontier.size, end)]
        rows = completed_subtrees(frontier, leaves, STORED_HEIGHT)
        _insert_nodes(session, dataset_id, rows)
        added += len(rows)
    return added


class _NotCaughtUp(Exception):
    """The stored roots do not cover the tree asked for yet (:func:`catch_up`)."""

    def __init__(self, dataset_id: str, head: int) -> None:
        super().__init__(dataset_id, head)
        self.dataset_id = dataset_id
        self.head = head


def _tree_read(
    uow: UnitOfWork,
    ds: Dataset,
    use: Callable[[TreeReader], T],
    also: Sequence[int] = (),
) -> tuple[T, dict[int, str]]:
    """``use`` run on the dataset's stored tree, reading only what it asks for (two queries),
    and the entry hashes it read (with the leaves ``also``); :class:`_NotCaughtUp` if a
    stored root it needs is missing."""
    keys, ranges = plan_reads(STORED_HEIGHT, use)
    session = uow.session
    nodes = _read_nodes(session, ds.id, keys)
    if len(nodes) != len(keys):
        raise _NotCaughtUp(ds.id, ds.last_seq)
    hashes = _read_hashes(session, ds.id, sorted({*ranges, *((i, i + 1) for i in also)}))
    leaves = {i: entry_leaf_hash(h) for i, h in hashes.items()}
    return use(StoredTree(STORED_HEIGHT, nodes, leaves).reader()), hashes


def _serve(uow: UnitOfWork, work: Callable[[UnitOfWork], T]) -> T:
    """``work`` in a read transaction; if the stored roots it needs are not there yet, they
    are caught up to the head and ``work`` runs again in the same write transaction (so a
    read served by a replica that has not received them yet still finds them)."""
    with uow.read_only():
        try:
            return work(uow)
        except _NotCaughtUp as missing:
            behind = missing
    with uow:
        catch_up(uow.session, behind.dataset_id, behind.head)
        try:
            out = work(uow)
        except _NotCaughtUp:
            raise RuntimeError(f"dataset '{behind.dataset_id}': stored roots missing") from None
        uow.commit()
    return out


def _inclusion(index: int, size: int) -> Callable[[TreeReader], tuple[bytes, list[bytes]]]:
    return lambda r: (r.root(size), r.inclusion_proof(index, size))


def _consistency(old: int, new: int) -> Callable[[TreeReader], tuple[bytes, bytes, list[bytes]]]:
    return lambda r: (r.root(old), r.root(new), r.consistency_proof(old, new))


def _frontier(doc: object) -> Frontier | None:
    return Frontier.from_json(doc) if isinstance(doc, dict) else None


def _check_head(dataset_id: str, head: TreeHead, frontier: Frontier | None) -> None:
    if frontier is not None and frontier.size == head.size and frontier.root() != head.root:
        raise RuntimeError(
            f"dataset '{dataset_id}': the stored Merkle frontier's root differs from its "
            f"entries' tree at size {head.size}"
        )


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

    def work(uow: UnitOfWork) -> InclusionProof:
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        head = ds.last_seq
        n = head if size is None else size
        _within("size", n, head, "a tree holds at most the entries written")
        if seq > n:
            raise InvalidQuery(
                f"entry {seq} is not in the tree of the first {n} entries: 'seq' is at most 'size'",
                field="seq",
            )
        (root, path), hashes = _tree_read(uow, ds, _inclusion(seq - 1, n), (seq - 1,))
        tree = TreeHead(n, root)
        _check_head(ds.id, tree, _frontier(ds.merkle_json))
        if not verify_inclusion(entry_leaf_hash(hashes[seq - 1]), seq - 1, n, path, root):
            raise RuntimeError(f"dataset '{ds.id}': stored Merkle roots disagree")
        return InclusionProof(
            dataset_id=ds.id,
            head_seq=head,
            seq=seq,
            entry_hash=hashes[seq - 1],
            tree=tree,
            path=path,
        )

    return _serve(uow, work)


def consistency_proof(
    uow: UnitOfWork, principal: Principal, dataset_id: str, old: int, new: int | None
) -> ConsistencyProof:
    """The consistency proof from the tree of the first ``old`` entries to the tree of the
    first ``new`` (the head's when ``None``); :class:`InvalidQuery` unless
    ``old <= new <= head``."""

    def work(uow: UnitOfWork) -> ConsistencyProof:
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        head = ds.last_seq
        n = head if new is None else new
        _within("to", n, head, "a tree holds at most the entries written")
        if old > n:
            raise InvalidQuery(
                f"'from' ({old}) is larger than 'to' ({n}): a consistency proof goes from an "
                "older (smaller) tree to a newer one",
                field="from",
            )
        (old_root, new_root, path), _ = _tree_read(uow, ds, _consistency(old, n))
        tree = TreeHead(n, new_root)
        _check_head(ds.id, tree, _frontier(ds.merkle_json))
        if not verify_consistency(old, n, old_root, new_root, path):
            raise RuntimeError(f"dataset '{ds.id}': stored Merkle roots disagree")
        return ConsistencyProof(
            dataset_id=ds.id, head_seq=head, old=TreeHead(old, old_root), new=tree, path=path
        )

    return _serve(uow, work)
