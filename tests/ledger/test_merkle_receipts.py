"""Signed tree heads and receipts (:mod:`odometer_core.ledger.receipts`).

A head is a c2sp.org/tlog-checkpoint note, checked here twice: by the note verifier (itself
held to Go's ``sumdb/note`` vectors in ``tests/ledger/test_notes.py``) and by hand from the
C2SP definitions (the key ID ``SHA-256(name || 0x0A || 0x01 || key)[:4]``, an Ed25519
signature of the text) with ``cryptography`` alone. A witness cosigns a head and is named
among its signers. Receipts are checked against later signed heads with inclusion proofs; an
operator who rewrites one entry and signs again is caught by the receipt of that entry and by
an auditor's earlier head, offline, with the public key alone; every one-bit change in a
receipt's signature, a head's root or a proof fails.
"""

from __future__ import annotations

import base64
import hashlib
import random

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from odometer_core.ledger.merkle import Frontier, TreeReader, entry_leaf_hash
from odometer_core.ledger.notes import COSIGNATURE_V1, NoteSigner
from odometer_core.ledger.receipts import (
    LogSigner,
    Receipt,
    ReceiptError,
    check_extends,
    check_receipt,
    open_head,
    open_receipt,
    origin,
)

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
WITNESS = Ed25519PrivateKey.from_private_bytes(bytes(range(2, 34)))
DS = "ds_0123456789abcdef"
_rng = random.Random(52)
HASHES = [_rng.randbytes(32).hex() for _ in range(1000)]


def _reader(hashes: list[str]) -> TreeReader:
    leaves = [entry_leaf_hash(h) for h in hashes]
    return TreeReader(leaves.__getitem__)


def _raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def test_a_signed_head_is_a_c2sp_checkpoint_checked_by_hand() -> None:
    root = Frontier.of_leaf_hashes(entry_leaf_hash(h) for h in HASHES[:5]).root()
    note = LogSigner(KEY, DS).head(5, root)
    text, _, sig_line = note.partition("\n\n")
    assert text == f"odometer/ledger/{DS}\n5\n{base64.b64encode(root).decode()}"
    # by hand: "— <name> base64(key ID || signature)"
    assert sig_line.startswith(f"\u2014 {origin(DS)} ") and sig_line.endswith("\n")
    blob = base64.b64decode(sig_line.split(" ")[2])
    key_id = hashlib.sha256(origin(DS).encode() + b"\n\x01" + _raw(KEY)).digest()[:4]
    assert blob[:4] == key_id
    KEY.public_key().verify(blob[4:], (text + "\n").encode())  # raises if it does not verify
    head = open_head(note, KEY.public_key())
    assert (head.dataset_id, head.size, head.root) == (DS, 5, root)
    assert head.signed_by == (f"{origin(DS)}+{key_id.hex()}",)
    with pytest.raises(ReceiptError):
        open_head(note, OTHER.public_key())
    # a one-bit change of the root, in the note, fails
    line = base64.b64encode(root).decode()
    flipped = bytearray(root)
    flipped[3] ^= 8
    with pytest.raises(ReceiptError):
        open_head(note.replace(line, base64.b64encode(bytes(flipped)).decode()), KEY.public_key())


def test_a_witness_cosigns_a_head_and_is_named() -> None:
    root = Frontier.of_leaf_hashes(entry_leaf_hash(h) for h in HASHES[:9]).root()
    note = LogSigner(KEY, DS).head(9, root)
    witness = NoteSigner("witness.example/w1", WITNESS, COSIGNATURE_V1)
    text, _, ours = note.partition("\n\n")
    cosigned = f"{text}\n\n{ours}{witness.sign(text + chr(10), 1_790_000_000).line()}"
    head = open_head(cosigned, KEY.public_key(), (witness.verifier,))
    assert len(head.signed_by) == 2
    assert head.signed_by[1] == f"witness.example/w1+{witness.key_id:08x}"
    # without the witness's key its line is not counted; the operator's still is
    assert open_head(cosigned, KEY.public_key()).signed_by == head.signed_by[:1]
    # a head the witness alone signed is not the operator's
    only = f"{text}\n\n{witness.sign(text + chr(10), 1_790_000_000).line()}"
    with pytest.raises(ReceiptError, match="operator"):
        open_head(only, KEY.public_key(), (witness.verifier,))


def test_a_receipt_round_trips_and_refuses_changes() -> None:
    receipt = LogSigner(KEY, DS).receipt(7, HASHES[6], "2026-11-29T16:00:00.000000Z")
    assert receipt.note.startswith(
        f"odometer.receipt/v1\n{origin(DS)}\n7\n{HASHES[6]}\n2026-11-29T16:00:00.000000Z\n\n"
    )
    doc = receipt.to_json()
    assert open_receipt(doc, KEY.public_key()) == receipt
    with pytest.raises(ReceiptError):
        open_receipt(doc, OTHER.public_key())
    for field, value in (("seq", 8), ("entry_hash", HASHES[7]), ("dataset_id", "ds_x")):
        with pytest.raises(ReceiptError):
            Receipt.from_json({**doc, field: value})
    # the note's own lines changed (the fields with them): the signature fails
    forged = {**doc, "seq": 8, "note": doc["note"].replace("\n7\n", "\n8\n")}
    with pytest.raises(ReceiptError, match="signature"):
        open_receipt(forged, KEY.public_key())
    sig = doc["note"].rsplit(" ", 1)[1]
    raw = bytearray(base64.b64decode(sig))
    for bit in range(0, len(raw) * 8, 37):
        bad = bytearray(raw)
        bad[bit // 8] ^= 1 << (bit % 8)
        note = doc["note"].replace(sig, base64.b64encode(bytes(bad)).decode() + "\n")
        with pytest.raises(ReceiptError):
            open_receipt({**doc, "note": note}, KEY.public_key())


def test_receipts_and_an_earlier_head_catch_a_rewritten_entry() -> None:
    """The operator gave receipts for entries 1..1000 and an auditor kept the signed head of
    700; then entry 500 is rewritten and every head signed again. The receipt of 500 and the
    auditor's head each catch it with the public key alone; receipts before 500 still check."""
    signer = LogSigner(KEY, DS)
    at = "2026-11-29T16:00:00.000000Z"
    receipts = {s: signer.receipt(s, HASHES[s - 1], at) for s in (1, 499, 500, 501, 1000)}
    honest = _reader(HASHES)
    head = open_head(signer.head(1000, honest.root(1000)), KEY.public_key())
    for seq, receipt in receipts.items():
        check_receipt(receipt, head, honest.inclusion_proof(seq - 1, 1000), KEY.public_key())
    audited = open_head(signer.head(700, honest.root(700)), KEY.public_key())
    check_extends(audited, head, honest.consistency_proof(700, 1000))

    rewritten = [*HASHES]
    rewritten[499] = hashlib.sha256(b"another entry").hexdigest()
    forged = _reader(rewritten)
    new_head = open_head(signer.head(1000, forged.root(1000)), KEY.public_key())
    with pytest.raises(ReceiptError, match="entry 500"):
        check_receipt(receipts[500], new_head, forged.inclusion_proof(499, 1000), KEY.public_key())
    with pytest.raises(ReceiptError, match="does not extend"):
        check_extends(audited, new_head, forged.consistency_proof(700, 1000))
    # the entries before it are still proved in the rewritten tree (their subtrees did not
    # change); after it too, in this synthetic tree whose leaves are not chained
    check_receipt(receipts[499], new_head, forged.inclusion_proof(498, 1000), KEY.public_key())
    # a head that dropped entries: behind a receipt
    short = open_head(signer.head(400, honest.root(400)), KEY.public_key())
    with pytest.raises(ReceiptError, match="dropped"):
        check_receipt(receipts[500], short, honest.inclusion_proof(0, 400), KEY.public_key())
    # a one-bit change in a proof fails
    proof = honest.inclusion_proof(499, 1000)
    for i in range(len(proof)):
        bad = [*proof]
        bad[i] = bytes([bad[i][0] ^ 1]) + bad[i][1:]
        with pytest.raises(ReceiptError):
            check_receipt(receipts[500], head, bad, KEY.public_key())
