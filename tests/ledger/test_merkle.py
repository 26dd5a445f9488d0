"""The ledger's Merkle tree (:mod:`odometer_core.ledger.merkle`) against RFC 6962/9162.

The reference here is a second implementation written from the text of RFC 6962 section 2.1
(the same definitions as RFC 9162 section 2.1), on purpose unlike the module's: MTH, PATH and
PROOF as the RFC's recursive definitions over Python lists, and verifiers that walk the same
recursion (a proof's last hash is the sibling at the top), not the RFC's bit-shifting
algorithms the module implements. Its roots are pinned to the RFC 6962 test data of the
Certificate Transparency implementations (the eight leaves and the roots of sizes 1 to 8).
Proofs of every leaf and every pair of sizes up to 300 (byte for byte up to 100) and of random
pairs up to 10^4 must be the reference's and verify both ways; a one-bit change of any proof
hash, or of the index, leaf or roots, fails. A maintained implementation checks them too:
pymerkle's verifier, ``tests/ledger/test_merkle_pymerkle.py`` (which says which checks are
whose).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from collections.abc import Sequence

import pytest

from odometer_core.ledger.entry import EntryKind, next_entry
from odometer_core.ledger.merkle import (
    EMPTY_ROOT,
    Frontier,
    NodeStore,
    StoredTree,
    TreeReader,
    completed_subtrees,
    entry_leaf,
    entry_leaf_hash,
    entry_leaf_hashes,
    inclusion_root,
    leaf_hash,
    node_hash,
    plan_reads,
    verify_consistency,
    verify_inclusion,
)


# ---------------------------------------------------------------------------- the reference
def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """The largest power of two smaller than n (RFC 6962 section 2.1), by doubling."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(leaves: Sequence[bytes]) -> bytes:
    return _ref_mth(tuple(leaves))


@functools.cache
def _ref_mth(leaves: tuple[bytes, ...]) -> bytes:
    """MTH, remembered per leaf list: a pure function of it, and the proofs of every leaf and
    pair below ask for the same subtrees' hashes again and again (the recursion's O(n) hashes
    per proof took most of the file's time; the definition is unchanged)."""
    n = len(leaves)
    if n == 0:
        return _sha(b"")
    if n == 1:
        return _sha(b"\x00" + leaves[0])
    k = _k(n)
    return _sha(b"\x01" + _ref_mth(leaves[:k]) + _ref_mth(leaves[k:]))


def ref_path(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    n = len(leaves)
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*ref_path(m, leaves[:k]), ref_mth(leaves[k:])]
    return [*ref_path(m - k, leaves[k:]), ref_mth(leaves[:k])]


def ref_proof(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    def subproof(m: int, d: Sequence[bytes], whole: bool) -> list[bytes]:
        n = len(d)
        if m == n:
            return [] if whole else [ref_mth(d)]
        k = _k(n)
        if m <= k:
            return [*subproof(m, d[:k], whole), ref_mth(d[k:])]
        return [*subproof(m - k, d[k:], False), ref_mth(d[:k])]

    return subproof(m, leaves, True) if 0 < m < len(leaves) else []


def ref_verify_inclusion(leaf: bytes, m: int, n: int, proof: Sequence[bytes], root: bytes) -> bool:
    """PATH's recursion run backwards: the proof's last hash is the top sibling."""

    def up(m: int, n: int, proof: Sequence[bytes]) -> bytes | None:
        if n == 1:
            return _sha(b"\x00" + leaf) if not proof else None
        if not proof:
            return None
        k, sibling = _k(n), proof[-1]
        below = up(m, k, proof[:-1]) if m < k else up(m - k, n - k, proof[:-1])
        if below is None:
            return None
        pair = below + sibling if m < k else sibling + below
        return _sha(b"\x01" + pair)

    return 0 <= m < n and up(m, n, proof) == root


def ref_verify_consistency(
    m: int, n: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """SUBPROOF's recursion run backwards: each step gives the old and the new subtree roots."""
    if not 0 <= m <= n:
        return False
    if m in (0, n):
        return not proof and (old_root == new_root if m == n else old_root == _sha(b""))

    def up(m: int, n: int, whole: bool, proof: Sequence[bytes]) -> tuple[bytes, bytes] | None:
        if m == n:
            if whole:
                return (old_root, old_root) if not proof else None
            return (proof[0], proof[0]) if len(proof) == 1 else None
        if not proof:
            return None
        k, sibling = _k(n), proof[-1]
        if m <= k:
            inner = up(m, k, whole, proof[:-1])
            if inner is None:
                return None
            return inner[0], _sha(b"\x01" + inner[1] + sibling)
        inner = up(m - k, n - k, False, proof[:-1])
        if inner is None:
            return None
        return _sha(b"\x01" + sibling + inner[0]), _sha(b"\x01" + sibling + inner[1])

    got = up(m, n, True, proof)
    return got is not None and got == (old_root, new_root)


# ---------------------------------------------------------------------------- data
#: The leaves of the RFC 6962 test data (certificate-transparency, merkle_tree_test), and the
#: roots of their first 1..8.
CT_LEAVES = [
    bytes.fromhex(h)
    for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657",
              "606162636465666768696a6b6c6d6e6f")
]  # fmt: skip
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]

SMALL = 300
#: Up to this size every proof is also compared with the reference's byte for byte (beyond, the
#: reference's recursion costs O(n) per proof; both verifiers still check every pair).
EXACT = 100
LARGE = 10_000
_rng = random.Random(20261129)
LEAVES = [_rng.randbytes(32) for _ in range(LARGE)]
LEAF_HASHES = [leaf_hash(x) for x in LEAVES]


@pytest.fixture(scope="module")
def store() -> NodeStore:
    store = NodeStore()
    for h in LEAF_HASHES:
        store.append(h)
    return store


@pytest.fixture(scope="module")
def ref_roots() -> list[bytes]:
    """The reference MTH of every prefix up to SMALL leaves."""
    return [ref_mth(LEAVES[:n]) for n in range(SMALL + 1)]


def _flip(value: bytes, rng: random.Random) -> bytes:
    changed = bytearray(value)
    changed[rng.randrange(len(changed))] ^= 1 << rng.randrange(8)
    return bytes(changed)


# ---------------------------------------------------------------------------- roots
def test_roots_of_the_rfc_6962_test_data() -> None:
    frontier = Frontier()
    assert frontier.root() == EMPTY_ROOT == ref_mth([])
    for n, (leaf, want) in enumerate(zip(CT_LEAVES, CT_ROOTS, strict=True), start=1):
        frontier.append(leaf_hash(leaf))
        assert frontier.root().hex() == want
        assert ref_mth(CT_LEAVES[:n]).hex() == want
        assert TreeReader(lambda i: leaf_hash(CT_LEAVES[i])).root(n).hex() == want


def test_leaf_and_node_hashes_are_domain_separated() -> None:
    assert leaf_hash(b"ab") == _sha(b"\x00ab")
    assert node_hash(b"a" * 32, b"b" * 32) == _sha(b"\x01" + b"a" * 32 + b"b" * 32)
    # a two-leaf tree's root is not the leaf hash of the two leaf hashes side by side
    two = Frontier.of_leaf_hashes([leaf_hash(b"x"), leaf_hash(b"y")]).root()
    assert two != leaf_hash(leaf_hash(b"x") + leaf_hash(b"y"))


def test_frontier_roots_at_every_size(store: NodeStore, ref_roots: list[bytes]) -> None:
    frontier = Frontier()
    reader = TreeReader(LEAF_HASHES.__getitem__)
    for n in range(SMALL + 1):
        assert frontier.size == n
        assert len(frontier.nodes) == n.bit_count()
        assert frontier.root() == ref_roots[n] == reader.root(n)
        assert TreeReader(nodes=store).frontier(n) == frontier
        if n < SMALL:
            frontier.append(LEAF_HASHES[n])
    assert Frontier.of_leaf_hashes(LEAF_HASHES).root() == store.root() == ref_mth(LEAVES)


def test_frontier_json_round_trip_and_refusals() -> None:
    frontier = Frontier.of_leaf_hashes(LEAF_HASHES[:77])
    doc = json.loads(json.dumps(frontier.to_json()))
    assert doc["type"] == "odometer.merkle-frontier.v1" and doc["size"] == 77
    assert len(doc["nodes"]) == 4  # 77 = 64 + 8 + 4 + 1: four roots
    back = Frontier.from_json(doc)
    assert back == frontier and back.root() == frontier.root()
    back.append(LEAF_HASHES[77])
    assert back.root() == ref_mth(LEAVES[:78]) and frontier.size == 77
    bad = [
        {**doc, "type": "other"},
        {**doc, "size": 79},
        {**doc, "size": -1},
        {**doc, "size": True},
        {**doc, "nodes": doc["nodes"][:-1]},
        {**doc, "nodes": [n.upper() for n in doc["nodes"]]},
        {**doc, "nodes": [*doc["nodes"][:-1], doc["nodes"][-1][:-2]]},
    ]
    for document in bad:
        with pytest.raises(ValueError):
            Frontier.from_json(document)


def test_append_json_is_append_on_the_stored_form(ref_roots: list[bytes]) -> None:
    """The write path's append (on the stored JSON, parsing only the roots it merges) gives
    the document :meth:`Frontier.to_json` writes after :meth:`Frontier.append`, at every size
    up to SMALL (every count of trailing one bits up to 8), through a JSON round trip."""
    entries = [h.hex() for h in LEAVES[:SMALL]]
    doc: dict[str, object] | None = None
    frontier = Frontier()
    for n, entry_hash in enumerate(entries, start=1):
        doc = json.loads(json.dumps(Frontier.append_json(doc, entry_hash)))
        frontier.append_entry(entry_hash)
        assert doc == frontier.to_json()
        assert Frontier.from_json(doc).root() == ref_roots[n]
    assert doc is not None
    for bad in ({**doc, "type": "other"}, {**doc, "size": 301}, {**doc, "nodes": []}):
        with pytest.raises(ValueError):
            Frontier.append_json(bad, entries[0])
    with pytest.raises(ValueError):
        Frontier.append_json(doc, entries[0].upper())


def test_the_leaf_of_an_entry_is_its_hash() -> None:
    head_seq, head_hash, frontier = 0, None, Frontier()
    hashes = []
    for n in range(5):
        entry = next_entry(
            dataset_id="ds",
            head_seq=head_seq,
            head_hash=head_hash,
            kind=EntryKind.DATASET_CREATED if n == 0 else EntryKind.BUDGET_CHANGED,
            actor="admin",
            at=f"2026-01-01T00:00:0{n}Z",
            accounting_version="1",
            state={"n": n},
        )
        head_seq, head_hash = entry.seq, entry.hash
        hashes.append(entry.hash)
        frontier.append_entry(entry.hash)
    assert entry_leaf(hashes[0]) == bytes.fromhex(hashes[0])
    assert entry_leaf_hash(hashes[0]) == _sha(b"\x00" + bytes.fromhex(hashes[0]))
    assert frontier.root() == ref_mth([bytes.fromhex(h) for h in hashes])
    for bad in (hashes[0].upper(), hashes[0][:-1], "g" * 64, 5):
        with pytest.raises(ValueError):
            entry_leaf(bad)  # type: ignore[arg-type]


def test_entry_leaf_hashes_are_entry_leaf_hash_of_each_and_refuse_the_same() -> None:
    """The service's form (checked together, :func:`entry_leaf_hashes`) is the one at a time."""
    hashes = [h.hex() for h in LEAVES[:600]]
    assert entry_leaf_hashes(hashes) == [entry_leaf_hash(h) for h in hashes] == LEAF_HASHES[:600]
    assert entry_leaf_hashes([]) == []
    # two wrong lengths whose concatenation is right, uppercase, not hex, not text, too short
    for bad in (
        [hashes[0][:-2], hashes[1] + "ab"],
        [hashes[0], hashes[1].upper()],
        [hashes[0][:-1] + "g"],
        [5],
        [hashes[0][:62]],
    ):
        with pytest.raises(ValueError):
            entry_leaf_hashes(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("keep_leaves", [True, False])
@pytest.mark.parametrize("stride", [1, 2, 3, 4, 8])
def test_a_node_store_at_any_stride_gives_the_same_tree(stride: int, keep_leaves: bool) -> None:
    n = 1000
    sparse = NodeStore(stride, keep_leaves=keep_leaves)
    for h in LEAF_HASHES[:n]:
        sparse.append(h)
    stored = sum((n >> level) for level in range(0 if keep_leaves else stride, 10, stride))
    assert sparse.stored_bytes == 32 * stored
    plain = TreeReader(LEAF_HASHES.__getitem__)
    # without its leaves, the store is read with the leaves beside it (as the ledger's hashes)
    reader = TreeReader(None if keep_leaves else LEAF_HASHES.__getitem__, nodes=sparse)
    assert sparse.root() == plain.root(n) == reader.root(n)
    for level in range(10):
        for index in {0, 1, (n >> level) - 1} & set(range(n >> level)):
            assert reader.node(level, index) == plain.node(level, index)
            if keep_leaves or level >= stride:
                assert sparse.node(level, index) == plain.node(level, index)
    with pytest.raises(IndexError):
        sparse.node(3, n >> 3)
    if not keep_leaves:
        with pytest.raises(LookupError):
            sparse.node(0, 5)
    for m, size in ((0, 1), (511, 1000), (999, 1000), (700, 777)):
        assert reader.inclusion_proof(m, size) == plain.inclusion_proof(m, size)
        assert reader.consistency_proof(m, size) == plain.consistency_proof(m, size)


# ---------------------------------------------------------------------------- inclusion
def test_inclusion_proofs_of_every_leaf_up_to_300(ref_roots: list[bytes]) -> None:
    reader = TreeReader(LEAF_HASHES.__getitem__, memo={})
    rng = random.Random(1)
    for n in range(1, SMALL + 1):
        root = ref_roots[n]
        for m in range(n):
            proof = reader.inclusion_proof(m, n)
            if n <= EXACT:
                assert proof == ref_path(m, LEAVES[:n]), (m, n)
            assert verify_inclusion(LEAF_HASHES[m], m, n, proof, root)
            assert ref_verify_inclusion(LEAVES[m], m, n, proof, root)
            # one flipped bit in each hash of the proof (in one of them past EXACT leaves),
            # in the leaf and in the root
            flipped = range(len(proof)) if n <= EXACT else [rng.randrange(len(proof))]
            for j in flipped if proof else ():
                bad = [*proof[:j], _flip(proof[j], rng), *proof[j + 1 :]]
                assert not verify_inclusion(LEAF_HASHES[m], m, n, bad, root)
                assert not ref_verify_inclusion(LEAVES[m], m, n, bad, root)
            assert not verify_inclusion(_flip(LEAF_HASHES[m], rng), m, n, proof, root)
            assert not verify_inclusion(LEAF_HASHES[m], m, n, proof, _flip(root, rng))


def test_an_inclusion_proof_names_its_place(ref_roots: list[bytes]) -> None:
    """Another index, another tree's root, a proof one hash short or long: each fails. (The
    size is bound by the signed head that carries the root: a proof of leaf 3 in the tree
    of 7 has the shape of one in the tree of 8, and RFC 9162 checks it against the root.)"""
    reader = TreeReader(LEAF_HASHES.__getitem__)
    for n, m in ((2, 0), (7, 3), (8, 7), (100, 37), (300, 299)):
        proof, root = reader.inclusion_proof(m, n), ref_roots[n]
        assert verify_inclusion(LEAF_HASHES[m], m, n, proof, root)
        assert not verify_inclusion(LEAF_HASHES[m], m ^ 1, n, proof, root)
        assert not verify_inclusion(LEAF_HASHES[m], m, n, proof, ref_roots[n - 1])
        assert not verify_inclusion(LEAF_HASHES[m], m, n, proof[:-1], root)
        assert not verify_inclusion(LEAF_HASHES[m], m, n, [*proof, proof[0]], root)
        assert not verify_inclusion(LEAF_HASHES[m], n, n, proof, root)
        assert not verify_inclusion(LEAF_HASHES[m], -1, n, proof, root)
        assert not verify_inclusion(LEAF_HASHES[m], m, n, [*proof[:-1], proof[-1][:31]], root)
    with pytest.raises(ValueError, match="too short"):
        inclusion_root(LEAF_HASHES[0], 0, 4, [LEAF_HASHES[1]])
    with pytest.raises(ValueError):
        reader.inclusion_proof(5, 5)


# ---------------------------------------------------------------------------- consistency
def test_consistency_proofs_of_every_pair_up_to_300(ref_roots: list[bytes]) -> None:
    reader = TreeReader(LEAF_HASHES.__getitem__, memo={})
    rng = random.Random(2)
    for n in range(0, SMALL + 1):
        for m in range(0, n + 1):
            proof = reader.consistency_proof(m, n)
            if n <= EXACT:
                assert proof == ref_proof(m, LEAVES[:n]), (m, n)
            old, new = ref_roots[m], ref_roots[n]
            assert verify_consistency(m, n, old, new, proof), (m, n)
            assert ref_verify_consistency(m, n, old, new, proof), (m, n)
            if m in (0, n):
                assert proof == []
                continue
            j = rng.randrange(len(proof))
            bad = [*proof[:j], _flip(proof[j], rng), *proof[j + 1 :]]
            assert not verify_consistency(m, n, old, new, bad)
            assert not ref_verify_consistency(m, n, old, new, bad)
            if n <= EXACT:
                assert not verify_consistency(m, n, _flip(old, rng), new, proof)
                assert not verify_consistency(m, n, old, _flip(new, rng), proof)
                assert not verify_consistency(m - 1, n, ref_roots[m - 1], new, proof)


def test_every_bit_of_a_consistency_proof_matters(ref_roots: list[bytes]) -> None:
    reader = TreeReader(LEAF_HASHES.__getitem__)
    for m, n in ((1, 2), (3, 7), (4, 8), (6, 8), (5, 300), (128, 300), (255, 256), (299, 300)):
        proof, old, new = reader.consistency_proof(m, n), ref_roots[m], ref_roots[n]
        assert verify_consistency(m, n, old, new, proof)
        for j in range(len(proof)):
            for bit in range(256):
                bad = bytearray(proof[j])
                bad[bit // 8] ^= 1 << (bit % 8)
                forged = [*proof[:j], bytes(bad), *proof[j + 1 :]]
                assert not verify_consistency(m, n, old, new, forged)
        assert not verify_consistency(m, n, old, new, proof[:-1])
        assert not verify_consistency(m, n, old, new, [*proof, proof[-1]])
        assert not verify_consistency(n, m, new, old, proof)


def test_consistency_at_the_edges(ref_roots: list[bytes]) -> None:
    root = ref_roots[5]
    assert verify_consistency(5, 5, root, root, [])
    assert not verify_consistency(5, 5, root, ref_roots[4], [])
    assert not verify_consistency(5, 5, root, root, [root])
    assert verify_consistency(0, 5, EMPTY_ROOT, root, [])
    assert not verify_consistency(0, 5, root, root, [])
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    # a prefix that is not one: the tree of 4 other leaves
    other = ref_mth([b"other"] * 4)
    proof = TreeReader(LEAF_HASHES.__getitem__).consistency_proof(4, 5)
    assert not verify_consistency(4, 5, other, root, proof)


# ---------------------------------------------------------------------------- large trees
def test_random_pairs_up_to_ten_thousand(store: NodeStore) -> None:
    rng = random.Random(3)
    reader = TreeReader(nodes=store)
    roots: dict[int, bytes] = {}

    def root(n: int) -> bytes:
        if n not in roots:
            roots[n] = Frontier.of_leaf_hashes(LEAF_HASHES[:n]).root()
        return roots[n]

    sizes = sorted({rng.randint(1, LARGE) for _ in range(40)} | {LARGE, 8192, 8193, 4097})
    for n in sizes:
        assert reader.root(n) == root(n)
        for m in [rng.randrange(n) for _ in range(6)] + [0, n - 1]:
            proof = reader.inclusion_proof(m, n)
            assert len(proof) <= math.ceil(math.log2(n))
            assert verify_inclusion(LEAF_HASHES[m], m, n, proof, root(n))
            assert ref_verify_inclusion(LEAVES[m], m, n, proof, root(n))
            if proof:
                j = rng.randrange(len(proof))
                bad = [*proof[:j], _flip(proof[j], rng), *proof[j + 1 :]]
                assert not verify_inclusion(LEAF_HASHES[m], m, n, bad, root(n))
        for m in [rng.randint(1, n) for _ in range(4)] + [1, n]:
            proof = reader.consistency_proof(m, n)
            assert len(proof) <= 2 * math.ceil(math.log2(n))
            assert verify_consistency(m, n, root(m), root(n), proof), (m, n)
            assert ref_verify_consistency(m, n, root(m), root(n), proof), (m, n)
            if proof:
                j = rng.randrange(len(proof))
                bad = [*proof[:j], _flip(proof[j], rng), *proof[j + 1 :]]
                assert not verify_consistency(m, n, root(m), root(n), bad)
    assert ref_path(4321, LEAVES) == reader.inclusion_proof(4321, LARGE)


class _Counting:
    def __init__(self, store: NodeStore) -> None:
        self.store, self.calls = store, 0

    def node(self, level: int, index: int) -> bytes:
        self.calls += 1
        return self.store.node(level, index)


def test_proofs_read_logarithmically_many_stored_nodes(store: NodeStore) -> None:
    """With every subtree root stored, a proof reads O(log n) of them: the work that serves
    it does not grow with the ledger."""
    rng = random.Random(4)
    for _ in range(50):
        n = rng.randint(2, LARGE)
        counting = _Counting(store)
        reader = TreeReader(nodes=counting)
        reader.inclusion_proof(rng.randrange(n), n)
        assert counting.calls <= 2 * math.ceil(math.log2(n)), n
        counting.calls = 0
        reader.consistency_proof(rng.randint(1, n), n)
        assert counting.calls <= 2 * math.ceil(math.log2(n)) ** 2, n


def test_without_stored_nodes_a_proof_reads_each_leaf_once_at_most() -> None:
    reads: list[int] = []

    def leaf_at(i: int) -> bytes:
        reads.append(i)
        return LEAF_HASHES[i]

    reader = TreeReader(leaf_at)
    proof = reader.inclusion_proof(123, 1000)
    assert sorted(reads) == [i for i in range(1000) if i != 123]
    assert verify_inclusion(LEAF_HASHES[123], 123, 1000, proof, ref_mth(LEAVES[:1000]))
    with pytest.raises(ValueError):
        TreeReader()


@pytest.mark.parametrize("height", [0, 3, 8])
def test_stored_roots_from_completed_subtrees_serve_every_proof(height: int) -> None:
    """The roots :func:`completed_subtrees` yields (levels >= height), read only where
    :func:`plan_reads` says, with the leaves it asks for, give the same roots and proofs as
    a reader of every leaf; and a proof reads at most two runs of 2^height leaves."""
    n = 1100
    frontier = Frontier()
    stored = {(lv, ix): h for lv, ix, h in completed_subtrees(frontier, LEAF_HASHES[:n], height)}
    assert frontier.size == n
    width = 1 << height
    assert len([k for k in stored if k[0] == height]) == n // width
    full = TreeReader(LEAF_HASHES.__getitem__)
    rng = random.Random(height)
    for _ in range(150):
        size = rng.randint(1, n)
        index = rng.randrange(size)
        old = rng.randint(0, size)

        def use(r: TreeReader, size: int = size, index: int = index, old: int = old) -> object:
            return r.root(size), r.inclusion_proof(index, size), r.consistency_proof(old, size)

        for one in (
            lambda r, size=size, index=index: r.inclusion_proof(index, size),
            lambda r, size=size, old=old: r.consistency_proof(old, size),
        ):
            _, ranges = plan_reads(height, one)
            assert sum(end - start for start, end in ranges) <= 2 * width
        keys, ranges = plan_reads(height, use)
        assert keys <= set(stored)
        leaves = {i: LEAF_HASHES[i] for start, end in ranges for i in range(start, end)}
        got = use(StoredTree(height, {k: stored[k] for k in keys}, leaves).reader())
        assert got == use(full)
    with pytest.raises(ValueError):
        completed_subtrees(Frontier(), [], -1)
