"""Proofs over a dataset's ledger: an entry's inclusion in the Merkle tree of its first
``size`` entries, and the tree of ``from`` entries a prefix of the tree of ``to``
(RFC 9162 sections 2.1.3 and 2.1.4; the tree is :mod:`odometer_core.ledger.merkle`'s, its leaf
``i`` the entry of ``seq = i + 1``).

Who may read a ledger may read its proofs (:func:`app.db.visibility.visible`, the one rule).

**Stored subtree roots.** Beside the frontier kept with the head (``datasets.merkle_json``),
``merkle_nodes`` (revision 0013) holds the root of every complete perfect subtree at least
:data:`STORED_HEIGHT` levels high (one per :data:`BLOCK` entries, and as many again above:
about ``n / 128`` rows, 7,800 for 10^6 entries). A proof asks for ``O(log n)`` of them and
reads at most two runs of :data:`BLOCK` entries' hashes below them (the proved entry's and the
right border's: :func:`odometer_core.ledger.merkle.plan_reads`).

**One statement.** Everything a proof reads — the dataset's head as the caller may see it, the
stored roots it names and the two runs of entries' hashes — is read by one ``SELECT``
(:func:`_read_sql`, a ``UNION ALL`` of the three, its text fixed per dialect and caller kind:
the roots it asks for go as one JSON parameter), in a read transaction of its own whose
``BEGIN`` and ``ROLLBACK`` go out with it on PostgreSQL (:func:`_read_once`): one round trip
to the database that serves the read, whatever the ledger's length
(``benchmarks/RESULTS.md``, *Proofs at 10^6 entries*). A proof of the head's tree (no ``size``)
is planned for the head this process last saw of the dataset (:class:`_HeadHints`, a hint: the
statement reads the head too, and when it moved since, the proof is planned again for the head
read and read once more — a second round trip, never a wrong tree).

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

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, TypeVar

import orjson
from sqlalchemy import (
    Connection,
    Integer,
    LargeBinary,
    Text,
    bindparam,
    cast,
    func,
    literal_column,
    null,
    select,
    text,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.driver import PipelinedTransaction, run, statement_text
from app.db.models import Dataset, Grant, LedgerEntry, MerkleNode
from app.db.uow import UnitOfWork
from app.db.visibility import visibility_params, visible
from app.services.errors import InvalidQuery, NotFound
from app.services.principals import Principal
from odometer_core.ledger.merkle import (
    Frontier,
    StoredTree,
    TreeReader,
    completed_subtrees,
    entry_leaf_hashes,
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


# ---------------------------------------------------------------------------- the read
_D = Dataset.__table__
_G = Grant.__table__
_N = MerkleNode.__table__
_E = LedgerEntry.__table__
#: The rows of the statement: what each is (its first column)
_HEAD, _NODE, _ENTRY = 0, 1, 2
#: The stored roots asked for: the one JSON parameter ``keys`` (``[[level, idx], …]``), each
#: looked up in the primary key's index (on PostgreSQL a ``LATERAL`` subquery, kept one by its
#: ``LIMIT``: flattened, the planner read every root of the dataset to hash-join them, 7,806
#: rows and 10 ms at 10^6 entries, where the probes take 0.1 ms; on SQLite ``CROSS JOIN``, which
#: keeps the keys the outer loop). One
#: parameter whatever their number: the statement's text is the same for every proof, so
#: psycopg prepares it once per connection.
_NODES: Final = {
    "postgresql": f"SELECT {_NODE}, n.level, n.idx, n.hash, CAST(NULL AS TEXT) "
    "FROM json_array_elements(CAST(:keys AS JSON)) AS k(value), LATERAL ("
    "SELECT level, idx, hash FROM merkle_nodes WHERE dataset_id = :dataset "
    "AND level = CAST(k.value ->> 0 AS INTEGER) AND idx = CAST(k.value ->> 1 AS INTEGER) "
    "LIMIT 1) AS n",
    "sqlite": f"SELECT {_NODE}, n.level, n.idx, n.hash, NULL FROM json_each(:keys) AS k "
    "CROSS JOIN merkle_nodes AS n WHERE n.dataset_id = :dataset "
    "AND n.level = k.value ->> 0 AND n.idx = k.value ->> 1",
}
#: The empty range: a proof reads at most two runs of entries, the statement always names two.
_NO_RUN: Final = (1, 0)


@lru_cache(maxsize=16)
def _read_sql(dialect: str, scoped: bool, analyst: bool) -> str:
    """The one statement of a proof: the dataset's head and frontier as a caller of this kind
    may see it (no row: not found), the stored roots named by ``keys``, and the entries'
    hashes with ``seq`` in ``[a0, b0]`` and in ``[a1, b1]`` (rows tagged :data:`_HEAD`,
    :data:`_NODE`, :data:`_ENTRY`)."""
    no_int, no_hash, no_text = cast(null(), Integer), cast(null(), LargeBinary), cast(null(), Text)
    head = visible(
        select(
            literal_column(str(_HEAD)), _D.c.last_seq, no_int, no_hash, cast(_D.c.merkle_json, Text)
        ),
        _D,
        _G,
        scoped=scoped,
        analyst=analyst,
    ).where(_D.c.id == bindparam("dataset"))
    nodes = text(_NODES[dialect]).columns(_N.c.level, _N.c.idx, _N.c.hash, no_text)
    runs = [
        select(literal_column(str(_ENTRY)), _E.c.seq, no_int, no_hash, _E.c.hash).where(
            _E.c.dataset_id == bindparam("dataset"),
            _E.c.seq.between(bindparam(f"a{i}"), bindparam(f"b{i}")),
        )
        for i in (0, 1)
    ]
    return statement_text(union_all(head, nodes, *runs), dialect)


@dataclass(frozen=True, slots=True)
class _Read:
    """What one statement read: the dataset's head (``None``: not found for this caller), its
    frontier's stored form, the stored roots by ``(level, idx)``, the entries' hashes by leaf
    index."""

    head: int | None
    frontier: str | None
    nodes: dict[tuple[int, int], bytes]
    hashes: dict[int, str]


def _read(
    conn: Connection,
    dataset_id: str,
    principal: Principal | None,
    keys: Iterable[tuple[int, int]],
    runs: Sequence[tuple[int, int]],
    *,
    then: Callable[[], object] | None = None,
) -> _Read:
    """Read ``keys`` (stored roots) and ``runs`` (at most two leaf ranges ``[start, end)``) of
    the dataset's tree, and its head as ``principal`` may see it (``None``: as the service
    itself, with no visibility rule), in one statement on ``conn``. ``then``: see
    :func:`app.db.driver.run`."""
    if len(runs) > 2:
        raise ValueError("a proof reads at most two runs of entries")
    viewer = principal.viewer if principal is not None else None
    scope = viewer.scope if viewer is not None else None
    analyst = viewer.analyst if viewer is not None else None
    sql = _read_sql(conn.dialect.name, scope is not None, analyst is not None)
    params: dict[str, Any] = {
        "dataset": dataset_id,
        "keys": orjson.dumps(sorted(set(keys))).decode(),
        **visibility_params(scope, analyst),
    }
    for i, (start, end) in enumerate([*runs, _NO_RUN, _NO_RUN][:2]):
        params[f"a{i}"], params[f"b{i}"] = start + 1, end  # leaves [start, end): seqs start+1..end
    head: int | None = None
    frontier: str | None = None
    nodes: dict[tuple[int, int], bytes] = {}
    hashes: dict[int, str] = {}
    for part, a, b, node, value in run(conn, sql, params, then=then):
        if part == _ENTRY:
            hashes[a - 1] = value
        elif part == _NODE:
            nodes[a, b] = bytes(node)
        else:
            head, frontier = a, value
    return _Read(head, frontier, nodes, hashes)


def _read_once(uow: UnitOfWork, work: Callable[[Connection, Callable[[], object]], T]) -> T:
    """``work(conn, end)`` in a read transaction on the database that serves ``uow``'s reads
    (a replica's, when it is one), where ``end`` ends the transaction: on PostgreSQL the
    transaction is pipelined (:class:`app.db.driver.PipelinedTransaction`), and ``end`` passed
    as a statement's ``then`` sends its ``ROLLBACK`` with that statement's ``BEGIN`` and the
    statement itself: one round trip for a read of one statement."""
    with uow.read_only():
        conn = uow.session.connection()
        if conn.dialect.name != "postgresql":
            return work(conn, _nothing)
        transaction = PipelinedTransaction(conn)
        try:
            return work(conn, transaction.rollback)
        finally:
            transaction.rollback()  # a no-op once ended


def _nothing() -> None:
    return None


# ---------------------------------------------------------------------------- head hints
class _HeadHints:
    """The head this process last read of each dataset, to plan a proof of the head's tree
    before reading it (:func:`_serve`). Only a hint: a proof planned for a head that moved is
    planned again for the head read with it, so a stale or foreign value (another database's
    dataset of that id) costs a round trip, never a wrong answer. At most :data:`LIMIT`
    datasets (then forgotten all at once)."""

    LIMIT: Final = 4096

    def __init__(self) -> None:
        self._heads: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, dataset_id: str) -> int | None:
        return self._heads.get(dataset_id)

    def put(self, dataset_id: str, head: int) -> None:
        with self._lock:
            if len(self._heads) >= self.LIMIT and dataset_id not in self._heads:
                self._heads.clear()
            self._heads[dataset_id] = head


_hints = _HeadHints()


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
    conn = session.connection()
    keys, _ = plan_reads(STORED_HEIGHT, lambda r: r.frontier(blocks * BLOCK))
    nodes = _read(conn, dataset_id, None, keys, []).nodes
    frontier = StoredTree(STORED_HEIGHT, nodes, {}).reader().frontier(blocks * BLOCK)
    added = 0
    while frontier.size < target * BLOCK:
        end = min(target * BLOCK, frontier.size + CATCH_UP_RUN)
        hashes = _read(conn, dataset_id, None, [], [(frontier.size, end)]).hashes
        if len(hashes) != end - frontier.size:
            raise RuntimeError(
                f"dataset '{dataset_id}' has {len(hashes)} entries in {frontier.size + 1}..{end}"
            )
        leaves = entry_leaf_hashes(hashes[i] for i in range(frontier.size, end))
        rows = completed_subtrees(frontier, leaves, STORED_HEIGHT)
        _insert_nodes(session, dataset_id, rows)
        added += len(rows)
    return added


# ---------------------------------------------------------------------------- serving
@dataclass(frozen=True, slots=True)
class _Tree:
    """What a proof read of a dataset's tree: the ``size`` it was planned for (``None``: none,
    the arguments asked for nothing that could be read), the dataset's ``head`` and the
    frontier's stored form read with it, the stored roots and leaves read (``stored``) and the
    entries' hashes by leaf index."""

    size: int | None
    head: int
    frontier: str | None
    stored: StoredTree
    hashes: dict[int, str]

    def sized(self, size: int | None, name: str) -> int:
        """The tree's size asked for (the head's when ``None``); :class:`InvalidQuery` past
        the head."""
        n = self.head if size is None else size
        if n > self.head:
            raise InvalidQuery(
                f"'{name}' is {n} but the ledger's head is seq {self.head}: a tree holds at "
                "most the entries written",
                field=name,
            )
        return n

    def check_root(self, dataset_id: str, root: bytes) -> None:
        """At the head's size, the root served must be the stored frontier's."""
        if self.size != self.head or self.frontier is None:
            return
        frontier = Frontier.from_json(orjson.loads(self.frontier))
        if frontier.size == self.size and frontier.root() != root:
            raise RuntimeError(
                f"dataset '{dataset_id}': the stored Merkle frontier's root differs from its "
                f"entries' tree at size {self.size}"
            )


class _NotCaughtUp(Exception):
    """The stored roots do not cover the tree asked for yet (:func:`catch_up`); its argument is
    the head read."""


#: What a proof reads and computes from the tree of ``n`` leaves (run once on a planner, then
#: on the stored roots read: :func:`odometer_core.ledger.merkle.plan_reads`)
Plan = Callable[[int], Callable[[TreeReader], Any]]


def _read_tree(
    conn: Connection,
    end: Callable[[], object],
    dataset_id: str,
    principal: Principal,
    n: int | None,
    plan: Plan,
    also: Sequence[int],
) -> _Tree:
    """The part of the dataset's tree of ``n`` leaves that ``plan(n)`` reads, with the leaves
    ``also``, in one statement (``n`` ``None``: only the head). :class:`NotFound` if the caller
    may not see the dataset; :class:`_NotCaughtUp` if a stored root it needs is missing."""
    keys: set[tuple[int, int]] = set()
    runs: list[tuple[int, int]] = []
    if n is not None:
        keys, runs = plan_reads(STORED_HEIGHT, plan(n), also)
    got = _read(conn, dataset_id, principal, keys, runs, then=end)
    if got.head is None:
        raise NotFound(f"dataset '{dataset_id}' not found")
    if n is not None and n <= got.head and len(got.nodes) != len(keys):
        raise _NotCaughtUp(got.head)
    leaves = dict(zip(got.hashes, entry_leaf_hashes(got.hashes.values()), strict=True))
    stored = StoredTree(STORED_HEIGHT, got.nodes, leaves)
    return _Tree(n, got.head, got.frontier, stored, got.hashes)


def _serve(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    size: int | None,
    *,
    least: int,
    plan: Plan,
    also: Sequence[int] = (),
) -> _Tree:
    """The part of the dataset's tree that ``plan(size)`` reads (``size``: the head's when
    ``None``; nothing is planned for a size below ``least``, the arguments' own bound), read in
    one statement; in two when the tree is the head's and the head moved since this process
    last read it, or was never read (:class:`_HeadHints`). :class:`NotFound` if the caller may
    not see the dataset. If stored roots it needs are missing, they are caught up to the head
    and read in the same write transaction (so a read served by a replica that has not received
    them yet still finds them). The caller checks the sizes against the head read
    (:meth:`_Tree.sized`)."""

    def planned(n: int | None) -> Callable[[Connection, Callable[[], object]], _Tree]:
        n = n if n is not None and n >= least else None
        return lambda conn, end: _read_tree(conn, end, dataset_id, principal, n, plan, also)

    wanted = size if size is not None else _hints.get(dataset_id)
    try:
        tree = _read_once(uow, planned(wanted))
        if size is None and tree.size != tree.head and tree.head >= least:
            # planned for another head: again, for the head read (its tree is fixed, the
            # ledger only grows past it)
            tree = _read_once(uow, planned(tree.head))
        _hints.put(dataset_id, tree.head)
        return tree
    except _NotCaughtUp as missing:
        behind: int = missing.args[0]
    with uow:
        catch_up(uow.session, dataset_id, behind)
        n = size if size is not None else behind
        try:
            tree = planned(n)(uow.session.connection(), _nothing)
        except _NotCaughtUp:
            raise RuntimeError(f"dataset '{dataset_id}': stored roots missing") from None
        uow.commit()
    return tree


def _inclusion(index: int, size: int) -> Callable[[TreeReader], tuple[bytes, list[bytes]]]:
    return lambda r: (r.root(size), r.inclusion_proof(index, size))


def _consistency(old: int, new: int) -> Callable[[TreeReader], tuple[bytes, bytes, list[bytes]]]:
    return lambda r: (r.root(old), r.root(new), r.consistency_proof(old, new))


def inclusion_proof(
    uow: UnitOfWork, principal: Principal, dataset_id: str, seq: int, size: int | None
) -> InclusionProof:
    """The inclusion proof of entry ``seq`` in the tree of the first ``size`` entries (the
    head's when ``None``); :class:`InvalidQuery` unless ``1 <= seq <= size <= head``."""
    index = seq - 1
    tree = _serve(
        uow,
        principal,
        dataset_id,
        size,
        least=seq,
        plan=lambda n: _inclusion(index, n),
        also=(index,),
    )
    n = tree.sized(size, "size")
    if seq > n:
        raise InvalidQuery(
            f"entry {seq} is not in the tree of the first {n} entries: 'seq' is at most 'size'",
            field="seq",
        )
    root, path = _inclusion(index, n)(tree.stored.reader())
    tree.check_root(dataset_id, root)
    if not verify_inclusion(tree.stored.node(0, index), index, n, path, root):
        raise RuntimeError(f"dataset '{dataset_id}': stored Merkle roots disagree")
    return InclusionProof(
        dataset_id=dataset_id,
        head_seq=tree.head,
        seq=seq,
        entry_hash=tree.hashes[index],
        tree=TreeHead(n, root),
        path=path,
    )


def consistency_proof(
    uow: UnitOfWork, principal: Principal, dataset_id: str, old: int, new: int | None
) -> ConsistencyProof:
    """The consistency proof from the tree of the first ``old`` entries to the tree of the
    first ``new`` (the head's when ``None``); :class:`InvalidQuery` unless
    ``old <= new <= head``."""
    tree = _serve(uow, principal, dataset_id, new, least=old, plan=lambda n: _consistency(old, n))
    n = tree.sized(new, "to")
    if old > n:
        raise InvalidQuery(
            f"'from' ({old}) is larger than 'to' ({n}): a consistency proof goes from an "
            "older (smaller) tree to a newer one",
            field="from",
        )
    old_root, new_root, path = _consistency(old, n)(tree.stored.reader())
    tree.check_root(dataset_id, new_root)
    if not verify_consistency(old, n, old_root, new_root, path):
        raise RuntimeError(f"dataset '{dataset_id}': stored Merkle roots disagree")
    return ConsistencyProof(
        dataset_id=dataset_id,
        head_seq=tree.head,
        old=TreeHead(old, old_root),
        new=TreeHead(n, new_root),
        path=path,
    )
