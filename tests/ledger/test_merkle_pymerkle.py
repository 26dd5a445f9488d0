"""The ledger's Merkle proofs checked by an independent, maintained implementation: pymerkle
(``pymerkle`` on PyPI, a dev dependency), whose trees hash as RFC 6962/9162 do (SHA-256, leaf
``0x00 || leaf``, node ``0x01 || left || right``, the left subtree the largest power of two
smaller than the width, the empty tree ``SHA-256()``).

Who checks what:

- **Roots** of every size up to 10^4: pymerkle's ``get_root`` is :class:`Frontier`'s root.
- **Inclusion proofs**: pymerkle's proofs carry the RFC's audit path (``PATH(m, D[n])``,
  bottom-up) after the leaf hash, with bits that say on which side each hash goes, which its
  verifier recomputes from the index and the size and requires. So the core's proof, as the
  service serves it, is handed to pymerkle's verifier as is (prefixed with the leaf's hash), for
  every size up to 10^4 (a random leaf of each; every leaf up to 64), and must also be
  pymerkle's own path byte for byte; a one-bit change of any of its hashes is refused by
  pymerkle.
- **Consistency proofs**: pymerkle's are not in the RFC's form (where the RFC goes left at
  ``m == k`` and drops the old root when the old tree is a complete left subtree, pymerkle goes
  right and keeps it: its proof of 2 → 4 has three hashes, the RFC's one), and its verifier
  reads only its own. For random pairs of sizes up to 10^4 the core's RFC proof is checked by
  the core's verifier and by ``tests/ledger/test_merkle.py``'s second implementation (the RFC's
  recursion run backwards), against the roots pymerkle computes; pymerkle's own proof between
  the same two sizes verifies with pymerkle against the same roots; and a one-bit change of any
  hash of the RFC proof fails both verifiers here.
"""

from __future__ import annotations

import random

import pytest
from pymerkle import InmemoryTree
from pymerkle import verify_consistency as pymerkle_verify_consistency
from pymerkle import verify_inclusion as pymerkle_verify_inclusion
from pymerkle.proof import InclusionProof, InvalidProof

from odometer_core.ledger.merkle import (
    EMPTY_ROOT,
    Frontier,
    NodeStore,
    TreeReader,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from tests.ledger.test_merkle import LARGE, LEAF_HASHES, LEAVES, ref_verify_consistency

#: every leaf of every tree up to this size; one random leaf of each larger tree
EVERY_LEAF_UP_TO = 64


@pytest.fixture(scope="module")
def trees() -> tuple[InmemoryTree, TreeReader, list[bytes]]:
    """pymerkle's tree of the LARGE leaves, the core's reader over a node store of the same
    leaves, and pymerkle's root of every size (0 to LARGE)."""
    theirs = InmemoryTree(algorithm="sha256")
    store = NodeStore()
    for leaf, hashed in zip(LEAVES, LEAF_HASHES, strict=True):
        theirs.append_entry(leaf)
        store.append(hashed)
    roots = [EMPTY_ROOT] + [theirs.get_root(n) for n in range(1, LARGE + 1)]
    return theirs, TreeReader(nodes=store), roots


def _flip(proof: list[bytes], rng: random.Random) -> list[bytes]:
    """``proof`` with one bit of one of its hashes changed."""
    j = rng.randrange(len(proof))
    changed = bytearray(proof[j])
    changed[rng.randrange(len(changed))] ^= 1 << rng.randrange(8)
    return [*proof[:j], bytes(changed), *proof[j + 1 :]]


def _pymerkle_accepts(
    rule: list[int], index: int, size: int, proof: list[bytes], root: bytes
) -> bool:
    """Whether pymerkle's verifier accepts the RFC audit path ``proof`` of leaf ``index``
    (0-based) in the tree of ``size`` leaves whose root is ``root``, the leaf hash first and
    the sides of the hashes as pymerkle lays out the proof of that leaf in that tree
    (``rule``, from pymerkle's own proof: its verifier recomputes it and requires it)."""
    base = LEAF_HASHES[index]
    candidate = InclusionProof("sha256", True, size, index + 1, rule, [base, *proof])
    try:
        pymerkle_verify_inclusion(base, root, candidate, index=index + 1, size=size)
    except InvalidProof:
        return False
    return True


def test_the_hashing_is_the_same() -> None:
    theirs = InmemoryTree(algorithm="sha256")
    assert theirs.hash_empty() == EMPTY_ROOT
    assert theirs.hash_buff(b"leaf") == leaf_hash(b"leaf")
    left, right = LEAF_HASHES[0], LEAF_HASHES[1]
    assert theirs.hash_pair(left, right) == Frontier.of_leaf_hashes([left, right]).root()


def test_roots_of_every_size_up_to_ten_thousand(
    trees: tuple[InmemoryTree, TreeReader, list[bytes]],
) -> None:
    _, _, roots = trees
    frontier = Frontier()
    for n in range(LARGE + 1):
        assert frontier.root() == roots[n], n
        if n < LARGE:
            frontier.append(LEAF_HASHES[n])


def test_inclusion_proofs_of_every_size_up_to_ten_thousand_verify_with_pymerkle(
    trees: tuple[InmemoryTree, TreeReader, list[bytes]],
) -> None:
    theirs, ours, roots = trees
    rng = random.Random(52)
    checked = flipped = 0
    for n in range(1, LARGE + 1):
        leaves = range(n) if n <= EVERY_LEAF_UP_TO else (rng.randrange(n),)
        for m in leaves:
            proof = ours.inclusion_proof(m, n)
            own = theirs.prove_inclusion(m + 1, n)
            assert own.path == [LEAF_HASHES[m], *proof], (m, n)
            assert _pymerkle_accepts(own.rule, m, n, proof, roots[n]), (m, n)
            assert verify_inclusion(LEAF_HASHES[m], m, n, proof, roots[n])
            checked += 1
            if proof:
                bad = _flip(proof, rng)
                assert not _pymerkle_accepts(own.rule, m, n, bad, roots[n]), (m, n)
                assert not verify_inclusion(LEAF_HASHES[m], m, n, bad, roots[n])
                flipped += 1
    assert checked == LARGE - EVERY_LEAF_UP_TO + EVERY_LEAF_UP_TO * (EVERY_LEAF_UP_TO + 1) // 2
    assert flipped == checked - 1  # all but the one-leaf tree's empty proof


def test_an_inclusion_proof_of_another_place_is_refused_by_pymerkle(
    trees: tuple[InmemoryTree, TreeReader, list[bytes]],
) -> None:
    theirs, ours, roots = trees
    for m, n in ((0, 2), (3, 7), (7, 8), (4321, LARGE), (LARGE - 1, LARGE)):
        proof = ours.inclusion_proof(m, n)
        rule = theirs.prove_inclusion(m + 1, n).rule
        assert _pymerkle_accepts(rule, m, n, proof, roots[n])
        other = m ^ 1 if m ^ 1 < n else m - 1
        assert not _pymerkle_accepts(
            theirs.prove_inclusion(other + 1, n).rule, other, n, proof, roots[n]
        )
        assert not _pymerkle_accepts(rule, m, n, proof, roots[n - 1])
        assert not _pymerkle_accepts(rule, m, n, proof[:-1], roots[n])


def test_consistency_of_random_pairs_up_to_ten_thousand(
    trees: tuple[InmemoryTree, TreeReader, list[bytes]],
) -> None:
    theirs, ours, roots = trees
    rng = random.Random(9162)
    pairs = {(rng.randint(1, LARGE), rng.randint(1, LARGE)) for _ in range(1500)}
    pairs = {(min(a, b), max(a, b)) for a, b in pairs}
    pairs |= {(1, 2), (2, 4), (4096, 4097), (4097, 8192), (8192, LARGE), (LARGE - 1, LARGE)}
    for m, n in sorted(pairs):
        proof = ours.consistency_proof(m, n)
        assert verify_consistency(m, n, roots[m], roots[n], proof), (m, n)
        assert ref_verify_consistency(m, n, roots[m], roots[n], proof), (m, n)
        # pymerkle's own proof, in its own form, between the same two roots
        pymerkle_verify_consistency(
            roots[m], roots[n], theirs.prove_consistency(m, n), prior_size=m, later_size=n
        )
        if m == n:
            assert proof == []
            continue
        bad = _flip(proof, rng)
        assert not verify_consistency(m, n, roots[m], roots[n], bad), (m, n)
        assert not ref_verify_consistency(m, n, roots[m], roots[n], bad), (m, n)
        assert not verify_consistency(m, n, roots[m - 1], roots[n], proof), (m, n)
