"""The witness of ledger heads as a cosigner (``odometer_core.ledger.cosign``), cosignatures
reported per witness by the verifier, and acknowledged forks read from their entries.

- the witness cosigns an operator-signed head, then a larger one only with a consistency
  proof from the one it cosigned; a rewritten head of the same size, an unsigned head, an
  older epoch are refused; a new epoch (an acknowledged loss) starts afresh;
- a second key's cosignature is reported by name and time (c2sp.org/tlog-cosignature v1,
  checked here against the message the document defines, with ``cryptography`` alone); a
  forged one is reported ``invalid`` and never counted, and does not reject the operator's
  signature;
- a ``loss_acknowledged`` entry's fork: its hash bound to its fields, which receipt and which
  held head it explains.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from odometer_core.ledger.chain import entry_hash
from odometer_core.ledger.cosign import (
    CosignedHeads,
    CosignRefused,
    cosigner_key,
    fork_of,
    head_forks,
    receipt_fork,
)
from odometer_core.ledger.merkle import Frontier, TreeReader, entry_leaf_hash
from odometer_core.ledger.notes import COSIGNATURE_V1, NoteSigner, parse_note
from odometer_core.ledger.receipts import LogSigner, open_head
from odometer_core.ledger.witness import DirectoryWitness

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
WITNESS = NoteSigner(
    "witness.example/w1", Ed25519PrivateKey.from_private_bytes(bytes(range(3, 35))), COSIGNATURE_V1
)
DS = "ds_cosign"
HASHES = [f"{i:064x}" for i in range(1, 20)]
T = 1_790_000_000


def _tree(hashes: list[str]) -> TreeReader:
    leaves = [entry_leaf_hash(h) for h in hashes]
    return TreeReader(leaves.__getitem__)


def _head(size: int, hashes: list[str] = HASHES) -> str:
    root = Frontier.of_leaf_hashes(entry_leaf_hash(h) for h in hashes[:size]).root()
    return LogSigner(KEY, DS).head(size, root)


OPERATOR = LogSigner(KEY, DS).signer.verifier


def test_the_witness_cosigns_only_heads_that_extend_the_last(tmp_path: Path) -> None:
    heads = CosignedHeads(tmp_path / "cosigned", WITNESS, fsync=False)
    first = heads.cosign(_head(5), OPERATOR, epoch=0, proof=[], timestamp=T)
    assert (first.size, first.epoch, first.cosigned_at) == (5, 0, T)
    assert heads.get(DS) == first
    # the same head again: the record as it is
    assert heads.cosign(_head(5), OPERATOR, epoch=0, proof=[], timestamp=T + 9) == first
    tree = _tree(HASHES)
    second = heads.cosign(
        _head(9), OPERATOR, epoch=0, proof=tree.consistency_proof(5, 9), timestamp=T + 1
    )
    assert second.size == 9
    # a rewritten ledger of 12 (entry 3 changed), signed by the operator: no proof will do
    forged = [*HASHES]
    forged[2] = "ab" * 32
    with pytest.raises(CosignRefused, match="does not extend the head of size 9"):
        heads.cosign(
            _head(12, forged),
            OPERATOR,
            epoch=0,
            proof=_tree(forged).consistency_proof(9, 12),
            timestamp=T + 2,
        )
    # the true one with a proof one bit off is refused too
    proof = tree.consistency_proof(9, 12)
    bad = [bytes([proof[0][0] ^ 1]) + proof[0][1:], *proof[1:]]
    with pytest.raises(CosignRefused):
        heads.cosign(_head(12), OPERATOR, epoch=0, proof=bad, timestamp=T + 2)
    assert heads.get(DS) == second
    # a head signed by another key is not the operator's
    other = LogSigner(Ed25519PrivateKey.from_private_bytes(bytes(range(5, 37))), DS)
    with pytest.raises(CosignRefused, match="operator"):
        heads.cosign(other.head(12, tree.root(12)), OPERATOR, epoch=0, proof=[], timestamp=T)
    # after an acknowledged loss (epoch 1) the forked head is cosigned afresh, and epoch 0
    # can never come back
    third = heads.cosign(_head(12, forged), OPERATOR, epoch=1, proof=[], timestamp=T + 3)
    assert (third.epoch, third.size) == (1, 12)
    with pytest.raises(CosignRefused, match="epoch 1"):
        heads.cosign(_head(13), OPERATOR, epoch=0, proof=[], timestamp=T + 4)


def test_a_second_key_cosigns_and_is_named_a_forged_one_is_not_counted(tmp_path: Path) -> None:
    heads = CosignedHeads(tmp_path / "cosigned", WITNESS, fsync=False)
    note = heads.cosign(_head(9), OPERATOR, epoch=0, proof=[], timestamp=T).note
    # the cosignature is C2SP's: Ed25519 over "cosignature/v1\ntime T\n" + the text, the
    # 8-byte time first, under the key ID of (name, 0x04, key)
    parsed = parse_note(note)
    line = parsed.signatures[-1]
    assert line.key_id == WITNESS.key_id and int.from_bytes(line.signature[:8], "big") == T
    WITNESS.private_key.public_key().verify(
        line.signature[8:], f"cosignature/v1\ntime {T}\n{parsed.text}".encode()
    )
    head = open_head(note, KEY.public_key(), (WITNESS.verifier,))
    assert head.seen_by == ("witness.example/w1",)
    assert [w.to_json() for w in head.witnesses] == [
        {"key": f"witness.example/w1+{WITNESS.key_id:08x}", "status": "verified", "time": T}
    ]
    assert head.signed_by[-1] == f"witness.example/w1+{WITNESS.key_id:08x}"
    # one bit of the cosignature flipped: reported invalid, not counted, the operator's
    # signature still verifies
    text, _, block = note.partition("\n\n")
    lines = block.splitlines()
    name, blob = lines[-1].rsplit(" ", 1)
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1
    forged = f"{text}\n\n{lines[0]}\n{name} {base64.b64encode(bytes(raw)).decode()}\n"
    seen = open_head(forged, KEY.public_key(), (WITNESS.verifier,))
    assert seen.seen_by == ()
    assert [w.status for w in seen.witnesses] == ["invalid"]
    assert len(seen.signed_by) == 1  # the operator alone
    # a witness that did not sign is absent
    other = NoteSigner("witness.example/w2", Ed25519PrivateKey.generate(), COSIGNATURE_V1)
    assert [w.status for w in open_head(note, KEY.public_key(), (other.verifier,)).witnesses] == [
        "absent"
    ]


def test_the_witness_directory_keeps_its_cosigner(tmp_path: Path) -> None:
    text = WITNESS.skey()
    store = DirectoryWitness(tmp_path / "w", fsync=False, cosigner=cosigner_key(text))
    assert store.cosigned is not None
    assert store.cosigned.verifier.vkey() == WITNESS.verifier.vkey()
    assert DirectoryWitness(tmp_path / "w2", fsync=False).cosigned is None
    with pytest.raises(ValueError, match="cosignature"):
        CosignedHeads(tmp_path / "c", NoteSigner("w", WITNESS.private_key))


def _ack(seq: int, kept: int, at: str, signed: dict[str, object] | None) -> dict[str, object]:
    request: dict[str, object] = {
        "witnessed_seq": 9,
        "witnessed_hash": HASHES[8],
        "database_seq": kept,
    }
    if signed is not None:
        request["signed_head"] = signed
    entry: dict[str, object] = {
        "dataset_id": DS,
        "seq": seq,
        "kind": "loss_acknowledged",
        "actor": "admin",
        "at": at,
        "request": request,
        "reason": "restored the 02:00 backup",
        "prev_hash": HASHES[kept - 1],
    }
    entry["hash"] = entry_hash(entry)
    return entry


def test_an_acknowledgement_names_the_fork_and_explains_what_it_cut() -> None:
    root = _tree(HASHES).root(9)
    entry = _ack(5, 4, "2026-11-29T17:00:00.000000Z", {"size": 9, "root": root.hex()})
    fork = fork_of(entry)
    assert (fork.seq, fork.kept, fork.lost_from, fork.witnessed_seq) == (5, 4, 5, 9)
    assert fork.signed_head == (9, root)
    assert "the loss of entries 5..9 on 2026-11-29T17:00:00.000000Z (by admin" in fork.says()
    # its fields are bound by its hash
    changed = {**entry, "actor": "someone else"}
    with pytest.raises(ValueError, match="hash"):
        fork_of(changed)
    with pytest.raises(ValueError, match="loss_acknowledged"):
        fork_of({**entry, "kind": "budget_changed"})
    # a receipt of entry 7 written before it is explained; entry 3 (kept) or a receipt
    # written after it (the new history) are not
    assert receipt_fork(7, "2026-11-29T16:00:00.000000Z", [fork]) == fork
    assert receipt_fork(3, "2026-11-29T16:00:00.000000Z", [fork]) is None
    assert receipt_fork(7, "2026-11-29T18:00:00.000000Z", [fork]) is None
    # a held head past the kept prefix is explained; one within it is not (it must extend);
    # the one the acknowledgement names comes first
    later = fork_of(_ack(8, 7, "2026-11-29T19:00:00.000000Z", None))
    assert head_forks(9, root, [later, fork]) == [fork, later]
    assert head_forks(4, root, [fork]) == []
    # an entry written before signed heads were named (no signed_head) still reads
    assert fork_of(_ack(5, 4, "2026-11-29T17:00:00.000000Z", None)).signed_head is None
    with pytest.raises(ValueError, match="signed_head"):
        fork_of(_ack(5, 4, "2026-11-29T17:00:00.000000Z", {"size": 9, "root": "zz"}))
