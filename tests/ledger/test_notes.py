"""Signed notes and checkpoints (:mod:`odometer_core.ledger.notes`) against the vectors of
other implementations: the keys, signature and notes of Go's ``golang.org/x/mod/sumdb/note``
tests (``note_test.go``: PeterNeumann and EnochRoot) and the example key and note of
c2sp.org/signed-note. Ed25519 is deterministic, so signing the Go test's text with its private
key must give its note byte for byte. A checkpoint signed by the operator's checkpoint key and
cosigned by a second key reports both keys; a verifier that knows only one reports that one."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from odometer_core.ledger.checkpoints import Signer, generate_key_pem, load_private_key
from odometer_core.ledger.merkle import Frontier, leaf_hash
from odometer_core.ledger.notes import (
    COSIGNATURE_V1,
    ED25519,
    Checkpoint,
    Note,
    NoteError,
    NoteSignature,
    NoteSigner,
    NoteVerifier,
    cosignature_time,
    key_id,
    open_checkpoint,
    open_note,
    parse_note,
    sign_checkpoint,
    sign_note,
)

# golang.org/x/mod/sumdb/note, note_test.go (TestSign, TestOpen)
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqf"
    "qdngotpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "\u2014 EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGw"
    "nWLox33WWd1RvMc+QQ=\n"
)
# c2sp.org/signed-note: the example verifier key and note
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6T"
    "fXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)


def test_go_keys_parse_and_print_back() -> None:
    peter, enoch = NoteVerifier.from_vkey(PETER_VKEY), NoteVerifier.from_vkey(ENOCH_VKEY)
    assert (peter.name, peter.key_id) == ("PeterNeumann", 0xC74F20A3)
    assert (enoch.name, enoch.key_id) == ("EnochRoot", 0xAF0CFE78)
    assert peter.vkey() == PETER_VKEY and enoch.vkey() == ENOCH_VKEY
    signer = NoteSigner.from_skey(PETER_SKEY)
    assert signer.skey() == PETER_SKEY
    assert signer.verifier.vkey() == PETER_VKEY
    assert key_id("PeterNeumann", peter.public_key) == 0xC74F20A3
    spec = NoteVerifier.from_vkey(SPEC_VKEY)
    assert (spec.name, spec.key_id, spec.vkey()) == ("example.com/foo", 0x530D903A, SPEC_VKEY)


def test_mangled_verifier_keys_are_refused() -> None:
    """As Go's TestNewVerifier: every proper substring and every one-byte change fails."""
    for i in range(len(PETER_VKEY)):
        changed = PETER_VKEY[:i] + chr(ord(PETER_VKEY[i]) + 1) + PETER_VKEY[i + 1 :]
        with pytest.raises((NoteError, ValueError)):
            NoteVerifier.from_vkey(changed)
    for cut in (1, 9, 10, 18, len(PETER_VKEY) - 1):
        with pytest.raises((NoteError, ValueError)):
            NoteVerifier.from_vkey(PETER_VKEY[:cut])
    for bad in (
        # wrong key length, unknown algorithm (Go's own cases, with adjusted key IDs)
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ):
        with pytest.raises(NoteError):
            NoteVerifier.from_vkey(bad)


def test_signing_the_go_text_gives_the_go_note() -> None:
    signer = NoteSigner.from_skey(PETER_SKEY)
    want = TEXT + "\n" + PETER_SIG
    assert sign_note(TEXT, signer) == want
    # an old signature by the same key is replaced, not kept beside the new one
    stale = Note(TEXT, (NoteSignature("PeterNeumann", 0xC74F20A3, b"\x00" * 64),))
    assert sign_note(stale, signer) == want
    with pytest.raises(NoteError):
        sign_note("abc", signer)
    with pytest.raises(NoteError):
        sign_note("a\x01b\n", signer)


def test_open_the_go_notes() -> None:
    peter, enoch = NoteVerifier.from_vkey(PETER_VKEY), NoteVerifier.from_vkey(ENOCH_VKEY)
    note = TEXT + "\n" + PETER_SIG + ENOCH_SIG
    one = open_note(note, [peter])
    assert one.text == TEXT
    assert one.signed_by == ("PeterNeumann+c74f20a3",)
    assert [(s.name, s.key_id) for s in one.unverified] == [("EnochRoot", 0xAF0CFE78)]
    both = open_note(note, [peter, enoch])
    assert both.signed_by == ("PeterNeumann+c74f20a3", "EnochRoot+af0cfe78")
    assert both.unverified == ()
    with pytest.raises(NoteError, match="no verifiable signature"):
        open_note(note, [])
    # a known key's signature that does not verify rejects the note (Go's "ABCD" insertion)
    with pytest.raises(NoteError, match="invalid signature for key PeterNeumann\\+c74f20a3"):
        open_note(TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:], [peter])
    # repeated lines: one verified signature per key, repeated unknown ones once
    enoch_abcd = ENOCH_SIG[:60] + "ABCD" + ENOCH_SIG[60:]
    repeated = open_note(
        TEXT + "\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + ENOCH_SIG + enoch_abcd, [peter]
    )
    assert repeated.signed_by == ("PeterNeumann+c74f20a3",)
    assert len(repeated.unverified) == 2
    # the c2sp.org/signed-note example
    spec = open_note(SPEC_NOTE, [NoteVerifier.from_vkey(SPEC_VKEY)])
    assert spec.text == "This is an example message.\n"
    assert spec.signed_by == ("example.com/foo+530d903a",)


@pytest.mark.parametrize(
    "message",
    [
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG,
        TEXT + "\n" + "\u2014 Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2p"
        "ZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=",
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
        TEXT + "\n" + PETER_SIG * 101,
        TEXT + "\n" + "\u2014 PeterNeumann AAAA\n",
        TEXT + "\n" + "- PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2p"
        "ZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n",
    ],
)
def test_malformed_notes_are_refused(message: str) -> None:
    """Go's malformed messages (TestOpen) and a few more: each is a NoteError."""
    with pytest.raises(NoteError):
        open_note(message, [NoteVerifier.from_vkey(PETER_VKEY)])
    with pytest.raises(NoteError):
        open_note(b"\xff" + message.encode(), [NoteVerifier.from_vkey(PETER_VKEY)])


def test_a_text_with_blank_lines_splits_at_the_last_one() -> None:
    signer = NoteSigner.from_skey(PETER_SKEY)
    text = "first\n\nsecond\n"
    note = parse_note(sign_note(text, signer))
    assert note.text == text
    assert open_note(note, [signer.verifier]).text == text


# transparency-dev/formats, note/note_cosigv1_test.go: a cosigner's verifier key (type 0x04),
# an Ed25519 one whose base64 holds a '+', and a cosignature whose time is 1727964367
COSIGNER_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
PLUS_VKEY = "TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6"
COSIGNATURE_B64 = (
    "ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFiEBYJ"
    "XORmnFBOBA=="
)
# c2sp.org/tlog-cosignature: its example checkpoint, cosigned at 1679315147 (the time of the
# signed message the document shows)
SPEC_COSIGNED = (
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
    "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Z"
    "hcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrD"
    "JsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
)


def test_cosigner_keys_and_times_of_other_implementations() -> None:
    cosigner = NoteVerifier.from_vkey(COSIGNER_VKEY)
    assert (cosigner.name, cosigner.kind, cosigner.key_id) == (
        "remora.n621.de",
        COSIGNATURE_V1,
        0xDA77ADE7,
    )
    assert cosigner.vkey() == COSIGNER_VKEY
    plus = NoteVerifier.from_vkey(PLUS_VKEY)
    assert (plus.kind, plus.key_id, plus.vkey()) == (ED25519, 0x7997405C, PLUS_VKEY)
    blob = base64.b64decode(COSIGNATURE_B64)
    signature = NoteSignature("w", int.from_bytes(blob[:4], "big"), blob[4:])
    assert cosignature_time(signature) == 1727964367
    with pytest.raises(NoteError):
        cosignature_time(NoteSignature("w", 0, b"\x00" * 64))
    spec = parse_note(SPEC_COSIGNED)
    assert Checkpoint.parse(spec.text).size == 20852163
    assert cosignature_time(spec.signatures[1]) == 1679315147


def test_a_witness_cosignature_states_its_time() -> None:
    operator = NoteSigner("odometer.example/ledger", Ed25519PrivateKey.generate())
    key = Ed25519PrivateKey.generate()
    witness = NoteSigner("witness.example/w1", key, COSIGNATURE_V1)
    root = Frontier.of_leaf_hashes([leaf_hash(b"x")]).root()
    checkpoint = Checkpoint("odometer.example/ledger/ds-1", 1, root, ("an extension",))
    with pytest.raises(NoteError, match="needs its time"):
        sign_checkpoint(checkpoint, witness)
    note = sign_checkpoint(checkpoint, operator, witness, timestamp=1_800_000_000)
    head, who = open_checkpoint(note, [operator.verifier, witness.verifier])
    assert head == checkpoint
    assert who.times == (None, 1_800_000_000)
    # the signed message is the one c2sp.org/tlog-cosignature spells out, checked here with
    # the plain Ed25519 key: the time line, then the checkpoint's text, extension included
    cosignature = parse_note(note).signatures[1]
    assert cosignature.signature[:8] == (1_800_000_000).to_bytes(8, "big")
    message = (
        b"cosignature/v1\ntime 1800000000\nodometer.example/ledger/ds-1\n1\n"
        + base64.b64encode(root)
        + b"\nan extension\n"
    )
    key.public_key().verify(cosignature.signature[8:], message)
    assert witness.verifier.vkey().split("+")[2].startswith("B")  # type byte 0x04
    # the same key as a plain note key is another key: its ID differs, so it is unknown
    plain = NoteVerifier("witness.example/w1", key.public_key())
    assert plain.key_id != witness.key_id
    with pytest.raises(NoteError, match="no verifiable signature"):
        open_checkpoint(sign_checkpoint(checkpoint, witness, timestamp=1), [plain])
    # the time is signed: a cosignature moved to another time no longer verifies
    line = parse_note(note).signatures[1]
    moved = NoteSignature(
        line.name, line.key_id, (1_800_000_001).to_bytes(8, "big") + line.signature[8:]
    )
    forged = note.replace(line.line(), moved.line())
    with pytest.raises(NoteError, match=r"invalid signature for key witness\.example/w1"):
        open_checkpoint(forged, [witness.verifier])
    # and so are the extension lines
    with pytest.raises(NoteError, match="invalid signature"):
        open_checkpoint(note.replace("an extension", "an extensioN"), [witness.verifier])


# ---------------------------------------------------------------------------- checkpoints
def _operator() -> tuple[Signer, bytes]:
    pem, _public = generate_key_pem()
    return Signer(load_private_key(pem), every=1000), pem


def test_a_checkpoint_round_trips_and_is_the_c2sp_text() -> None:
    root = Frontier.of_leaf_hashes([leaf_hash(bytes([i])) for i in range(5)]).root()
    checkpoint = Checkpoint("odometer.example/ledger/ds-1", 5, root)
    assert checkpoint.text() == (
        f"odometer.example/ledger/ds-1\n5\n{base64.b64encode(root).decode()}\n"
    )
    assert Checkpoint.parse(checkpoint.text()) == checkpoint
    with_ext = Checkpoint("o", 0, Frontier().root(), ("ext one", "ext two"))
    assert Checkpoint.parse(with_ext.text()) == with_ext
    b64 = base64.b64encode(root).decode()
    for bad in (
        f"o\n05\n{b64}\n",  # leading zero
        f"o\n-5\n{b64}\n",
        f"o\n5\n{b64}",  # no final newline
        f"o\n5\n{b64}\n\nx\n",  # empty line
        f"\n5\n{b64}\n",
        "o\n5\n" + base64.b64encode(root[:31]).decode() + "\n",
        "o\n5\n",
    ):
        with pytest.raises(NoteError):
            Checkpoint.parse(bad)


def test_the_operator_key_signs_and_a_second_key_cosigns() -> None:
    signer, _pem = _operator()
    operator = NoteSigner.from_checkpoint_signer(signer, "odometer.example/ledger")
    witness = NoteSigner("witness.example/w1", Ed25519PrivateKey.generate())
    root = Frontier.of_leaf_hashes([leaf_hash(b"e%d" % i) for i in range(1000)]).root()
    checkpoint = Checkpoint("odometer.example/ledger/ds-1", 1000, root)

    signed = sign_checkpoint(checkpoint, operator)
    cosigned = sign_note(parse_note(signed), witness)
    assert cosigned.startswith(signed)  # the cosignature is appended

    head, who = open_checkpoint(cosigned, [operator.verifier, witness.verifier])
    assert head == checkpoint
    assert who.signed_by == (
        f"odometer.example/ledger+{operator.key_id:08x}",
        f"witness.example/w1+{witness.key_id:08x}",
    )
    # a verifier that knows only the witness says so, and lists the operator's as unknown
    _head, only = open_checkpoint(cosigned, [witness.verifier])
    assert only.signed_by == (f"witness.example/w1+{witness.key_id:08x}",)
    assert [s.name for s in only.unverified] == ["odometer.example/ledger"]
    # the operator's note key is the checkpoint key: same public key as its checkpoints
    assert operator.verifier.public_key.public_bytes_raw() == signer.public_key.public_bytes_raw()
    # a changed head no longer verifies under either key
    forged = cosigned.replace("\n1000\n", "\n999\n")
    for verifiers in ([operator.verifier], [witness.verifier]):
        with pytest.raises(NoteError, match="invalid signature"):
            open_checkpoint(forged, verifiers)
    # a key of the same name but another key pair is not the operator's: unknown, not valid
    impostor = NoteSigner("odometer.example/ledger", Ed25519PrivateKey.generate())
    with pytest.raises(NoteError, match="no verifiable signature"):
        open_checkpoint(cosigned, [impostor.verifier])


def test_key_names_are_checked() -> None:
    key = Ed25519PrivateKey.generate()
    for bad in ("", "a b", "a+b", "a\tb", "a\u00a0b"):
        with pytest.raises(NoteError):
            NoteSigner(bad, key)


def test_the_docs_example_head_opens() -> None:
    """docs/ledger.md's Python block (a head signed by the operator and cosigned by a witness)
    runs: its note and keys are real, and its assertion holds."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ledger.md").read_text("utf-8")
    section = doc[doc.index("## Merkle tree and signed tree heads") :]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], "docs/ledger.md", "exec"), namespace)
    assert namespace["signed"].signed_by == (  # type: ignore[attr-defined]
        "odometer.example.org+1e4f08f1",
        "witness.example.net+4cb9c65c",
    )
