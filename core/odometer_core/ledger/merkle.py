"""A Merkle tree over a dataset's ledger (RFC 9162, Certificate Transparency v2, section 2.1).

Why: the hash chain lets an auditor who holds the *whole* export check it, and a signed head
pins one ``(seq, hash)``. It cannot show, in little data, that one entry is in the ledger at
its place, or that today's ledger extends the one audited last quarter: both mean
re-hashing everything. A Merkle tree over the same entries can: an inclusion proof (one entry
in a tree of ``n``) and a consistency proof (the tree of ``m`` is a prefix of the tree of
``n``) are each at most about ``2 log2 n`` hashes, checked against signed tree heads
(:mod:`odometer_core.ledger.notes`).

The hashing is RFC 9162's (the same as RFC 6962's), domain-separated so that no leaf can pass
for an inner node::

    leaf hash = SHA-256(0x00 || leaf)          MTH({})   = SHA-256()   (the empty tree)
    node hash = SHA-256(0x01 || left || right) MTH(D[n]) = node(MTH(D[0:k]), MTH(D[k:n]))

with ``k`` the largest power of two smaller than ``n``. Leaf ``i`` (0-based) is the entry of
``seq = i + 1``, and **the leaf is the entry's hash as 32 raw bytes** (``bytes.fromhex`` of
its ``hash`` field, :func:`entry_leaf`): that hash already commits to every field of the
entry and to its predecessor's hash (:mod:`odometer_core.ledger.chain`), so hashing the
canonical JSON again would add cost and nothing else, and a proof names the very hash the
export, the checkpoints and the witness already show. The tree of size ``n`` covers the
entries ``1..n``: its root commits to them as a set with positions, and, through the chain,
the last one to the whole history.

What is here (pure: no I/O, no clock):

- :func:`leaf_hash`, :func:`node_hash`, :func:`entry_leaf`, :func:`entry_leaf_hashes`,
  :data:`EMPTY_ROOT`;
- :class:`Frontier`, the incremental tree kept beside a dataset's head: the roots of the
  perfect subtrees that make up the tree (one per set bit of its size, so ``O(log n)``
  hashes), extended by one leaf in amortised ``O(1)`` (worst ``O(log n)``) hashes, giving the
  root at its size, and written to and read from JSON (:meth:`Frontier.to_json`);
- :class:`TreeReader`, proofs from a leaf-hash accessor (a callable giving the leaf hash of
  leaf ``i``) and an optional source of cached perfect-subtree roots (:class:`NodeStore`, or
  the service's table): with every subtree root at hand, an inclusion proof costs ``O(log n)``
  look-ups and at most ``O(log n)`` hashes (one right-border range is not a perfect subtree
  and is folded from ``O(log n)`` of them), a consistency proof ``O(log n)`` look-ups and at
  most ``O(log^2 n)`` hashes in the worst case; without any cache it is correct and ``O(n)``;
- :func:`verify_inclusion` and :func:`verify_consistency`, the algorithms of RFC 9162
  sections 2.1.3.2 and 2.1.4.2 as written there (and :func:`inclusion_root`, the root an
  inclusion proof leads to, for a caller that compares it with several heads).

Proofs are lists of 32-byte hashes, bottom-up, in the order of RFC 9162 (``PATH`` and
``PROOF``, sections 2.1.3.1 and 2.1.4.1); their wire encoding is the caller's (base64 or hex,
one per line or a JSON list).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

HASH_SIZE: Final = 32
#: MTH of the empty list: the SHA-256 of nothing (RFC 9162 section 2.1.1).
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
FRONTIER_TYPE: Final = "odometer.merkle-frontier.v1"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_sha256 = hashlib.sha256


# ---------------------------------------------------------------------------- hashing
def leaf_hash(leaf: bytes) -> bytes:
    """``SHA-256(0x00 || leaf)`` (RFC 9162 section 2.1.1)."""
    return _sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)`` (RFC 9162 section 2.1.1)."""
    return _sha256(b"\x01" + left + right).digest()


def entry_leaf(entry_hash: str) -> bytes:
    """The leaf of a ledger entry: its ``hash`` (64 lowercase hex digits) as 32 raw bytes."""
    if not isinstance(entry_hash, str) or _HEX64.fullmatch(entry_hash) is None:
        raise ValueError(f"an entry hash is 64 lowercase hex digits, not {entry_hash!r}")
    return bytes.fromhex(entry_hash)


def entry_leaf_hash(entry_hash: str) -> bytes:
    """:func:`leaf_hash` of :func:`entry_leaf`: the tree's leaf hash of a ledger entry."""
    return leaf_hash(entry_leaf(entry_hash))


def entry_leaf_hashes(entry_hashes: Iterable[str]) -> list[bytes]:
    """:func:`entry_leaf_hash` of each of ``entry_hashes``, checked together: one
    ``bytes.fromhex`` of them all and one comparison with its lowercase hex, instead of a
    pattern match and a conversion each (a proof hashes up to 512 entries: this halves what
    that costs). ``ValueError`` as :func:`entry_leaf`, for the first that is not 64 lowercase
    hex digits or for all of them."""
    hashes = list(entry_hashes)
    try:
        joined = "".join(hashes)
        raw = bytes.fromhex(joined)
    except (TypeError, ValueError):
        joined, raw = "", b"-"
    if (
        len(raw) != HASH_SIZE * len(hashes)
        or raw.hex() != joined
        or not set(map(len, hashes)) <= {2 * HASH_SIZE}
    ):
        for h in hashes:
            entry_leaf(h)  # names the first that is not one
        raise ValueError("entry hashes are 64 lowercase hex digits each")
    step = HASH_SIZE
    return [_sha256(b"\x00" + raw[i : i + step]).digest() for i in range(0, len(raw), step)]


def _split(width: int) -> int:
    """The largest power of two smaller than ``width`` (``width >= 2``): RFC 9162's ``k``."""
    return 1 << ((width - 1).bit_length() - 1)


def _merges(size: int) -> int:
    """How many subtree roots a leaf appended to a tree of ``size`` leaves merges with: the
    trailing one bits of ``size``."""
    return (size ^ (size + 1)).bit_length() - 1


def _check_hash(value: object, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        raise ValueError(f"{what} is a {HASH_SIZE}-byte hash")
    return value


# ---------------------------------------------------------------------------- frontier
class Frontier:
    """The incremental tree: the roots of the perfect subtrees that make up the tree of
    ``size`` leaves, largest (leftmost) first, one per set bit of ``size``.

    For ``size = 2^a + 2^b + 2^c`` (``a > b > c``) they are the roots of leaves
    ``[0, 2^a)``, ``[2^a, 2^a + 2^b)`` and the last ``2^c``; the tree's root folds them from
    the right, ``node(T_a, node(T_b, T_c))``, which is RFC 9162's MTH because each left
    subtree of the definition is a perfect one. Appending a leaf pushes its hash and merges the
    two last roots while they are the same height (one merge per trailing one bit of the old
    size): amortised one node hash per leaf.
    """

    __slots__ = ("_nodes", "_size")

    def __init__(self, size: int = 0, nodes: Sequence[bytes] = ()) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"a tree size is an integer >= 0, not {size!r}")
        if len(nodes) != size.bit_count():
            raise ValueError(
                f"a frontier of size {size} holds {size.bit_count()} subtree roots, "
                f"not {len(nodes)}"
            )
        self._size = size
        self._nodes = [_check_hash(n, "a subtree root") for n in nodes]

    @classmethod
    def of_leaf_hashes(cls, hashes: Iterable[bytes]) -> Frontier:
        frontier = cls()
        for h in hashes:
            frontier.append(h)
        return frontier

    @classmethod
    def at(cls, size: int, nodes: NodeSource) -> Frontier:
        """The frontier of the tree of ``size`` leaves from cached subtree roots (``O(log n)``
        look-ups): to start keeping a tree beside a ledger that already has one stored."""
        out: list[bytes] = []
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                out.append(nodes.node(level, start >> level))
                start += 1 << level
        return cls(size, out)

    @property
    def size(self) -> int:
        return self._size

    @property
    def nodes(self) -> tuple[bytes, ...]:
        return tuple(self._nodes)

    def copy(self) -> Frontier:
        return Frontier(self._size, self._nodes)

    def append(
        self, leaf_hash_: bytes, on_node: Callable[[int, bytes], None] | None = None
    ) -> None:
        """Add the leaf whose *leaf hash* is given (:func:`leaf_hash`, :func:`entry_leaf_hash`).

        ``on_node(level, hash)``, if given, is told every perfect-subtree root this completes,
        the leaf itself at level 0 first: at each level, the roots arrive in index order."""
        nodes = self._nodes
        nodes.append(_check_hash(leaf_hash_, "a leaf hash"))
        if on_node is not None:
            on_node(0, leaf_hash_)
        for level in range(1, _merges(self._size) + 1):
            right = nodes.pop()
            nodes[-1] = _sha256(b"\x01" + nodes[-1] + right).digest()
            if on_node is not None:
                on_node(level, nodes[-1])
        self._size += 1

    def append_entry(self, entry_hash: str) -> None:
        """Add the ledger entry whose ``hash`` is given (the next ``seq``)."""
        self.append(entry_leaf_hash(entry_hash))

    @staticmethod
    def append_json(doc: Mapping[str, Any] | None, entry_hash: str) -> dict[str, Any]:
        """:meth:`append_entry` on the stored form (:meth:`to_json`; ``None`` for the empty
        tree): the document of the frontier with the entry of hash ``entry_hash`` as its next
        leaf. Only what the append changes is parsed and written out: the leaf's hash is merged
        with the last subtree roots while they are as high (one per trailing one bit of the
        size, one on average), the other roots' text is kept as it is (about 5 µs, against
        26 µs through :meth:`from_json`, :meth:`append` and :meth:`to_json` at 10^5 leaves).
        ``ValueError`` for a document that is not a frontier's (its roots are not re-checked:
        this is the write path's form, read back from where it wrote it)."""
        size: Any = 0
        nodes: Any = []
        if doc is not None:
            size, nodes = doc.get("size"), doc.get("nodes")
            if (
                doc.get("type") != FRONTIER_TYPE
                or not isinstance(size, int)
                or not isinstance(nodes, list)
                or len(nodes) != size.bit_count()
            ):
                raise ValueError(f"not a {FRONTIER_TYPE} document")
        kept = len(nodes) - _merges(size)
        node = leaf_hash(entry_leaf(entry_hash))
        for left in reversed(nodes[kept:]):
            node = _sha256(b"\x01" + bytes.fromhex(left) + node).digest()
        return {"type": FRONTIER_TYPE, "size": size + 1, "nodes": [*nodes[:kept], node.hex()]}

    def root(self) -> bytes:
        """MTH of the ``size`` leaves (:data:`EMPTY_ROOT` for none)."""
        nodes = self._nodes
        if not nodes:
            return EMPTY_ROOT
        root = nodes[-1]
        for left in reversed(nodes[:-1]):
            root = node_hash(left, root)
        return root

    def to_json(self) -> dict[str, Any]:
        """``{"type", "size", "nodes": [hex, ...]}``: what the service keeps beside the head."""
        return {
            "type": FRONTIER_TYPE,
            "size": self._size,
            "nodes": [n.hex() for n in self._nodes],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Frontier:
        """The frontier :meth:`to_json` wrote (``ValueError`` for anything else)."""
        if doc.get("type") != FRONTIER_TYPE:
            raise ValueError(f"not a {FRONTIER_TYPE} document")
        nodes = doc.get("nodes")
        if not isinstance(nodes, list) or not all(
            isinstance(n, str) and _HEX64.fullmatch(n) for n in nodes
        ):
            raise ValueError("a frontier's nodes are 64 lowercase hex digits each")
        return cls(doc.get("size"), [bytes.fromhex(n) for n in nodes])  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frontier):
            return NotImplemented
        return self._size == other._size and self._nodes == other._nodes

    def __hash__(self) -> int:
        return hash((self._size, tuple(self._nodes)))

    def __repr__(self) -> str:
        return f"Frontier(size={self._size}, root={self.root().hex()[:16]}…)"


# ---------------------------------------------------------------------------- stored subtrees
class NodeSource(Protocol):
    """Roots of perfect subtrees: ``node(level, index)`` is MTH of leaves
    ``[index * 2^level, (index + 1) * 2^level)``, asked only of subtrees that are complete."""

    def node(self, level: int, index: int) -> bytes: ...


class NodeStore:
    """The perfect-subtree roots of a tree, kept as it grows: every level whose height is a
    multiple of ``stride``, the leaves' own level only if ``keep_leaves`` (a ledger has them
    already: its entries' hashes). A root at another level folds at most ``2^(stride - 1)``
    stored ones; below the first stored level (no leaves kept) :meth:`node` raises
    ``LookupError`` and a :class:`TreeReader` reads the leaves instead. For ``n`` leaves:
    ``stride = 1`` keeps ``2n`` hashes (64 MB for ``10^6``), ``stride = 4`` without the leaves
    ``n / 15`` (2.1 MB). Levels are ``bytearray`` runs of 32-byte hashes in memory (a verifier
    holding an export, a test, a benchmark); the service would keep the same levels in its
    database."""

    __slots__ = ("_frontier", "_levels", "keep_leaves", "stride")

    def __init__(self, stride: int = 1, *, keep_leaves: bool = True) -> None:
        if not isinstance(stride, int) or stride < 1:
            raise ValueError("the stride is an integer >= 1")
        self.stride = stride
        self.keep_leaves = keep_leaves
        self._levels: dict[int, bytearray] = {}
        self._frontier = Frontier()

    @property
    def size(self) -> int:
        return self._frontier.size

    @property
    def frontier(self) -> Frontier:
        return self._frontier.copy()

    @property
    def stored_bytes(self) -> int:
        return sum(len(run) for run in self._levels.values())

    def append(self, leaf_hash_: bytes) -> None:
        self._frontier.append(leaf_hash_, self._keep)

    def _keep(self, level: int, value: bytes) -> None:
        if level % self.stride == 0 and (level or self.keep_leaves):
            run = self._levels.get(level)
            if run is None:
                run = self._levels[level] = bytearray()
            run += value

    def node(self, level: int, index: int) -> bytes:
        if (index + 1) << level > self.size or index < 0 or level < 0:
            raise IndexError(f"no complete subtree at level {level}, index {index}")
        base = level - level % self.stride
        if base == 0 and not self.keep_leaves:
            raise KeyError(f"level {level} is below the first stored level")
        run = self._levels[base]
        if base == level:
            return bytes(run[HASH_SIZE * index : HASH_SIZE * (index + 1)])
        width = 1 << (level - base)
        first = index * width
        hashes = [
            bytes(run[HASH_SIZE * i : HASH_SIZE * (i + 1)]) for i in range(first, first + width)
        ]
        while len(hashes) > 1:
            hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
        return hashes[0]

    def leaf_hash(self, index: int) -> bytes:
        return self.node(0, index)

    def root(self) -> bytes:
        return self._frontier.root()


def completed_subtrees(
    frontier: Frontier, leaf_hashes: Iterable[bytes], height: int
) -> list[tuple[int, int, bytes]]:
    """The roots ``(level, index, hash)`` of every perfect subtree at least ``height`` levels
    high that appending ``leaf_hashes`` to ``frontier`` completes, in the order they complete
    (``frontier`` is moved): what a store of the roots at levels ``>= height`` adds when its
    tree grows (the service's ``merkle_nodes``, revision 0013). The subtree completed at level
    ``l`` by leaf ``i`` is the one of index ``i >> l``."""
    if not isinstance(height, int) or height < 0:
        raise ValueError("a height is an integer >= 0")
    out: list[tuple[int, int, bytes]] = []
    for leaf in leaf_hashes:
        index = frontier.size

        def keep(level: int, value: bytes, index: int = index) -> None:
            if level >= height:
                out.append((level, index >> level, value))

        frontier.append(leaf, keep)
    return out


class _Planner:
    """A :class:`NodeSource` that answers every subtree root with zeros and notes which were
    asked: the stored ones (at least ``height`` high) and the leaves below the others."""

    def __init__(self, height: int) -> None:
        self.height = height
        self.nodes: set[tuple[int, int]] = set()
        self.leaves: set[tuple[int, int]] = set()

    def node(self, level: int, index: int) -> bytes:
        if level >= self.height:
            self.nodes.add((level, index))
        else:
            self.leaves.add((index << level, (index + 1) << level))
        return bytes(HASH_SIZE)


def plan_reads(
    height: int, use: Callable[[TreeReader], object], leaves: Iterable[int] = ()
) -> tuple[set[tuple[int, int]], list[tuple[int, int]]]:
    """What ``use(reader)`` (proofs and roots asked of a :class:`TreeReader`) reads from a tree
    whose perfect-subtree roots are stored at every level ``>= height`` and whose leaves are
    read for the rest: the stored roots' ``(level, index)`` and the leaf ranges
    ``[start, end)`` (merged, sorted), with the leaves ``leaves`` too (a proved leaf's own
    hash). A proof asks for ``O(log n)`` roots and at most ``2^(height + 1)`` leaves (the ones
    under the proved leaf's and under the right border's lowest stored subtree, the proved leaf
    among them), so it can be served in two reads (:class:`StoredTree`)."""
    planner = _Planner(height)
    use(TreeReader(nodes=planner))
    planner.leaves.update((i, i + 1) for i in leaves)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(planner.leaves):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return planner.nodes, merged


class StoredTree:
    """A :class:`NodeSource` over roots stored at every level ``>= height``
    (``{(level, index): hash}``) and the leaf hashes of the ranges below them
    (``{index: leaf hash}``), both read as :func:`plan_reads` says; a root below ``height``
    is folded from its leaves (level by level, remembered). ``KeyError`` for a root or leaf
    that was not read."""

    def __init__(
        self, height: int, nodes: Mapping[tuple[int, int], bytes], leaves: Mapping[int, bytes]
    ) -> None:
        self.height = height
        self._nodes = nodes
        self._leaves = leaves
        self._folded: dict[tuple[int, int], bytes] = {}

    def node(self, level: int, index: int) -> bytes:
        if level >= self.height:
            return self._nodes[level, index]
        if level == 0:
            return self._leaves[index]
        key = (level, index)
        found = self._folded.get(key)
        if found is None:
            leaves = self._leaves
            run = [leaves[i] for i in range(index << level, (index + 1) << level)]
            while len(run) > 1:
                run = [
                    _sha256(b"\x01" + run[i] + run[i + 1]).digest() for i in range(0, len(run), 2)
                ]
            found = self._folded[key] = run[0]
        return found

    def reader(self) -> TreeReader:
        return TreeReader(nodes=self)


# ---------------------------------------------------------------------------- proofs
class TreeReader:
    """Roots, inclusion and consistency proofs over the first ``size`` leaves of a tree.

    ``leaf_hash_at(i)`` gives the leaf hash of leaf ``i`` (0-based; for a ledger, the
    :func:`entry_leaf_hash` of the entry of ``seq = i + 1``). ``nodes`` optionally gives the
    roots of perfect subtrees (a :class:`NodeStore`, or a table), and raises ``LookupError``
    (``KeyError``, ``IndexError``) for one it does not have; missing ones are computed from the
    level below and remembered in ``memo`` (a dict the caller may keep between calls) when at
    least ``memo_from`` levels high. With no ``nodes`` and no memo, a proof of a tree of ``n``
    leaves reads every leaf once: ``O(n)``.
    """

    def __init__(
        self,
        leaf_hash_at: Callable[[int], bytes] | None = None,
        *,
        nodes: NodeSource | None = None,
        memo: dict[tuple[int, int], bytes] | None = None,
        memo_from: int = 1,
    ) -> None:
        if leaf_hash_at is None and nodes is None:
            raise ValueError("a tree reader needs a leaf-hash accessor or stored subtree roots")
        self._leaf = leaf_hash_at
        self._nodes = nodes
        self._memo = memo
        self._memo_from = memo_from

    def node(self, level: int, index: int) -> bytes:
        """MTH of the perfect subtree ``[index * 2^level, (index + 1) * 2^level)``."""
        if self._nodes is not None:
            try:
                return self._nodes.node(level, index)
            except LookupError:
                pass
        memo = self._memo
        key = (level, index)
        if memo is not None and key in memo:
            return memo[key]
        if level == 0:
            if self._leaf is None:
                raise LookupError(f"no leaf hash {index}")
            return _check_hash(self._leaf(index), f"leaf hash {index}")
        value = node_hash(self.node(level - 1, 2 * index), self.node(level - 1, 2 * index + 1))
        if memo is not None and level >= self._memo_from:
            memo[key] = value
        return value

    def range_root(self, start: int, end: int) -> bytes:
        """MTH of the leaves ``[start, end)`` as a list of their own (RFC 9162's
        ``D[start:end]``)."""
        width = end - start
        if width <= 0:
            if width == 0:
                return EMPTY_ROOT
            raise ValueError(f"an empty or reversed range [{start}, {end})")
        # the perfect subtrees the range is made of, left to right, then folded from the right
        parts: list[bytes] = []
        while width:
            if width & (width - 1) == 0 and start % width == 0:
                level = width.bit_length() - 1
                parts.append(self.node(level, start >> level))
                break
            k = _split(width)
            if start % k:
                # not aligned: RFC 9162's recursion on the sublist (never met by the proofs)
                parts.append(self.range_root(start, start + k))
            else:
                level = k.bit_length() - 1
                parts.append(self.node(level, start >> level))
            start += k
            width -= k
        root = parts[-1]
        for left in reversed(parts[:-1]):
            root = node_hash(left, root)
        return root

    def root(self, size: int) -> bytes:
        """MTH of the first ``size`` leaves."""
        _check_size(size)
        return self.range_root(0, size)

    def frontier(self, size: int) -> Frontier:
        """The :class:`Frontier` of the first ``size`` leaves."""
        _check_size(size)
        return Frontier.at(size, self)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 section 2.1.3.1 ``PATH(index, D[size])``: the audit path of leaf ``index``
        (0-based) in the tree of ``size`` leaves, bottom-up."""
        _check_size(size)
        if not isinstance(index, int) or not 0 <= index < size:
            raise ValueError(f"leaf {index!r} is not in a tree of {size} leaves")
        path: list[bytes] = []
        start, end = 0, size
        while end - start > 1:
            k = _split(end - start)
            if index < start + k:
                path.append(self.range_root(start + k, end))
                end = start + k
            else:
                level = k.bit_length() - 1
                path.append(self.node(level, start >> level))
                start += k
        path.reverse()
        return path

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """RFC 9162 section 2.1.4.1 ``PROOF(old_size, D[new_size])``: the hashes that prove the
        tree of ``old_size`` leaves a prefix of the tree of ``new_size``; empty when
        ``old_size`` is 0 or equals ``new_size``."""
        _check_size(old_size)
        _check_size(new_size)
        if old_size > new_size:
            raise ValueError(f"old size {old_size} > new size {new_size}")
        if old_size in (0, new_size):
            return []
        # SUBPROOF(m, D[start:end], whole) unrolled: walk down to the subtree that ends the
        # old tree, collecting the siblings top-down, then reverse them.
        proof: list[bytes] = []
        m, start, end, whole = old_size, 0, new_size, True
        while m != end - start:
            k = _split(end - start)
            if m <= k:
                proof.append(self.range_root(start + k, end))
                end = start + k
            else:
                level = k.bit_length() - 1
                proof.append(self.node(level, start >> level))
                start += k
                m -= k
                whole = False
        if not whole:
            proof.append(self.range_root(start, end))
        proof.reverse()
        return proof


def _check_size(size: object) -> None:
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"a tree size is an integer >= 0, not {size!r}")


# ---------------------------------------------------------------------------- verification
def inclusion_root(leaf_hash_: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """The root that ``proof`` leads to from leaf ``index`` of a tree of ``size`` leaves
    (RFC 9162 section 2.1.3.2, steps 1 to 5 without the final comparison); ``ValueError`` if
    the proof cannot be one of that leaf in that tree (index out of range, wrong length)."""
    _check_size(size)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < size:
        raise ValueError(f"leaf {index!r} is not in a tree of {size} leaves")
    fn, sn = index, size - 1
    r = _check_hash(leaf_hash_, "the leaf hash")
    for p in proof:
        _check_hash(p, "a proof hash")
        if sn == 0:
            raise ValueError("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("the inclusion proof is too short")
    return r


def verify_inclusion(
    leaf_hash_: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Whether ``proof`` shows the leaf whose leaf hash is ``leaf_hash_`` at ``index`` of the
    tree of ``size`` leaves whose root is ``root`` (RFC 9162 section 2.1.3.2)."""
    try:
        return inclusion_root(leaf_hash_, index, size, proof) == root
    except ValueError:
        return False


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether ``proof`` shows the tree ``(old_size, old_root)`` a prefix of the tree
    ``(new_size, new_root)`` (RFC 9162 section 2.1.4.2).

    The RFC's algorithm is for ``0 < old_size < new_size``; at the edges: equal sizes need an
    empty proof and equal roots, and an empty old tree needs an empty proof and the empty
    root (every tree extends the empty one, but a size-0 head with another root is no tree).
    """
    try:
        _check_size(old_size)
        _check_size(new_size)
        _check_hash(old_root, "the old root")
        _check_hash(new_root, "the new root")
        path = [_check_hash(p, "a proof hash") for p in proof]
    except ValueError:
        return False
    if old_size > new_size:
        return False
    if old_size == new_size:
        return not path and old_root == new_root
    if old_size == 0:
        return not path and old_root == EMPTY_ROOT
    # 1. an empty proof fails; 2. a perfect old tree is its own first node
    if not path:
        return False
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    # 3., 4.
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # 5., 6.
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    # 7.
    return fr == old_root and sr == new_root and sn == 0
