"""Receipts and signed tree heads: what an analyst and an auditor can hold and check offline.

Two signed notes (c2sp.org/signed-note, :mod:`odometer_core.ledger.notes`), both signed with
the operator's checkpoint key (Ed25519) under the dataset's log name, :func:`origin`:

- the **signed tree head** of a dataset's ledger, a c2sp.org/tlog-checkpoint (origin, tree
  size, base64 root of the RFC 9162 tree over the first ``size`` entries:
  :mod:`odometer_core.ledger.merkle`), which transparency-log witnesses can cosign;
- the **receipt** of one entry, given with the answer that wrote it::

      odometer.receipt/v1
      <origin>
      <seq>
      <entry hash, 64 hex digits>
      <time the entry was written>

  signed the same way. It is a *promise with a bound of zero*: the entry is committed before
  the answer is sent, so every tree head the operator signs at a size ``>= seq`` must include
  it, at leaf ``seq - 1``, with that hash. The receipt holds no root (computing one on the
  write path costs more than signing; ``docs/ledger.md``); what binds the operator is the
  signature over ``(origin, seq, hash)``.

:func:`check_receipt` checks a receipt against a later signed head and an inclusion proof
(``O(log n)`` hashes); :func:`check_extends` checks that a later head extends an earlier one
with a consistency proof. Both are offline, with the operator's public key alone; a failure
is the operator's own signatures contradicting each other (``ReceiptError`` says which). Pure:
no I/O, no clock.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from odometer_core.ledger.merkle import (
    EMPTY_ROOT,
    Frontier,
    entry_leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from odometer_core.ledger.notes import (
    COSIGNATURE_V1,
    SIGNATURE_PREFIX,
    Checkpoint,
    Note,
    NoteError,
    NoteSigner,
    NoteVerifier,
    cosignature_time,
    open_checkpoint,
    open_note,
    parse_note,
)

RECEIPT_HEADER: Final = "odometer.receipt/v1"
RECEIPT_TYPE: Final = "odometer.receipt.v1"
#: Every dataset's log is named ``odometer/ledger/<dataset id>``: the origin line of its
#: signed heads and the key name its notes are signed under.
ORIGIN_PREFIX: Final = "odometer/ledger/"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DECIMAL = re.compile(r"[1-9][0-9]*")


class ReceiptError(ValueError):
    """A receipt or head that is malformed, unsigned, or contradicted (the message says which)."""


def origin(dataset_id: str) -> str:
    """The log name of a dataset's ledger (origin line and key name)."""
    return ORIGIN_PREFIX + dataset_id


def dataset_of(origin_line: str) -> str:
    if not origin_line.startswith(ORIGIN_PREFIX) or len(origin_line) == len(ORIGIN_PREFIX):
        raise ReceiptError(f"not an odometer ledger's origin: {origin_line!r}")
    return origin_line[len(ORIGIN_PREFIX) :]


class LogSigner:
    """The checkpoint key signing one dataset's notes, its note key ID computed once (it costs
    a public-key derivation and a hash: more than the signature itself)."""

    __slots__ = ("_prefix", "_sign", "dataset_id", "signer")

    def __init__(
        self,
        private_key: Ed25519PrivateKey,
        dataset_id: str,
        sign: Callable[[bytes], bytes] | None = None,
    ) -> None:
        """``sign``: the Ed25519 signature of a message with ``private_key`` by another
        implementation (the service passes libsodium's, through PyNaCl: the same bytes, RFC
        8032 signatures being deterministic, in about half the instructions);
        ``private_key.sign`` if none."""
        self.dataset_id = dataset_id
        self.signer = NoteSigner(origin(dataset_id), private_key)
        self._sign = sign or private_key.sign
        self._prefix = self.signer.key_id.to_bytes(4, "big")

    def _signed(self, text: str) -> str:
        """The note of ``text`` with this key's signature line (c2sp.org/signed-note:
        ``— <name> base64(key ID || Ed25519 signature)``)."""
        blob = base64.b64encode(self._prefix + self._sign(text.encode("utf-8")))
        return f"{text}\n{SIGNATURE_PREFIX}{self.signer.name} {blob.decode('ascii')}\n"

    def head(self, size: int, root: bytes) -> str:
        """The signed tree head of the tree of ``size`` entries whose root is ``root``."""
        return self._signed(Checkpoint(origin(self.dataset_id), size, root).text())

    def receipt(self, seq: int, entry_hash: str, at: str) -> Receipt:
        """The receipt of entry ``seq`` (one Ed25519 signature)."""
        text = receipt_text(self.dataset_id, seq, entry_hash, at)
        return Receipt(self.dataset_id, seq, entry_hash, at, self._signed(text))


def receipt_text(dataset_id: str, seq: int, entry_hash: str, at: str) -> str:
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ReceiptError(f"an entry's seq is an integer >= 1, not {seq!r}")
    if not isinstance(entry_hash, str) or _HEX64.fullmatch(entry_hash) is None:
        raise ReceiptError("an entry hash is 64 lowercase hex digits")
    if not at or "\n" in at or " " in at:
        raise ReceiptError(f"invalid time {at!r}")
    return f"{RECEIPT_HEADER}\n{origin(dataset_id)}\n{seq}\n{entry_hash}\n{at}\n"


@dataclass(frozen=True, slots=True)
class Receipt:
    """An entry's receipt: its fields and the signed note that states them."""

    dataset_id: str
    seq: int
    entry_hash: str
    at: str
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "type": RECEIPT_TYPE,
            "dataset_id": self.dataset_id,
            "seq": self.seq,
            "entry_hash": self.entry_hash,
            "at": self.at,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Receipt:
        """The receipt of a document :meth:`to_json` wrote; its fields must be the note's
        (nothing is verified: :func:`open_receipt`)."""
        if not isinstance(doc, dict) or doc.get("type") != RECEIPT_TYPE:
            raise ReceiptError(f"not a {RECEIPT_TYPE} document")
        note = doc.get("note")
        if not isinstance(note, str):
            raise ReceiptError("a receipt carries its signed note")
        fields = _parse_receipt_text(_text_of(note))
        claimed = (doc.get("dataset_id"), doc.get("seq"), doc.get("entry_hash"), doc.get("at"))
        if claimed != fields:
            raise ReceiptError("the receipt's fields are not its note's")
        return cls(*fields, note)


def _text_of(note: str) -> str:
    split = note.rfind("\n\n")
    if split < 0:
        raise ReceiptError("not a signed note")
    return note[: split + 1]


def _parse_receipt_text(text: str) -> tuple[str, int, str, str]:
    lines = text.split("\n")
    if len(lines) != 6 or lines[0] != RECEIPT_HEADER or lines[5] != "":
        raise ReceiptError(f"not an {RECEIPT_HEADER} note")
    dataset_id = dataset_of(lines[1])
    if _DECIMAL.fullmatch(lines[2]) is None or _HEX64.fullmatch(lines[3]) is None:
        raise ReceiptError("a receipt names a seq and a 64-hex-digit entry hash")
    return dataset_id, int(lines[2]), lines[3], lines[4]


def _verifier(dataset_id: str, public_key: Ed25519PublicKey) -> NoteVerifier:
    return NoteVerifier(origin(dataset_id), public_key)


def open_receipt(data: dict[str, Any] | Receipt, public_key: Ed25519PublicKey) -> Receipt:
    """The receipt, its signature verified with the operator's public key."""
    receipt = data if isinstance(data, Receipt) else Receipt.from_json(data)
    try:
        verified = open_note(receipt.note, [_verifier(receipt.dataset_id, public_key)])
    except NoteError as error:
        raise ReceiptError(f"the receipt's signature does not verify: {error}") from None
    if _parse_receipt_text(verified.text) != (
        receipt.dataset_id,
        receipt.seq,
        receipt.entry_hash,
        receipt.at,
    ):
        raise ReceiptError("the receipt's fields are not its note's")
    return receipt


@dataclass(frozen=True, slots=True)
class Seen:
    """What one cosigner the verifier trusts says of a head: ``verified`` (its cosignature
    checks, at ``time``), ``invalid`` (a line under its name and key ID that does not verify:
    never counted) or ``absent`` (no line of it)."""

    name: str
    key_id: int
    status: str
    time: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": f"{self.name}+{self.key_id:08x}",
            "status": self.status,
            "time": self.time,
        }


@dataclass(frozen=True, slots=True)
class SignedHead:
    """A dataset's signed tree head, verified: its checkpoint, who signed it (the operator
    and any cosigning witness whose key was given, ``signed_by``), and what each cosigner the
    verifier named says of it (``witnesses``)."""

    dataset_id: str
    size: int
    root: bytes
    signed_by: tuple[str, ...]
    note: str
    witnesses: tuple[Seen, ...] = ()

    @property
    def seen_by(self) -> tuple[str, ...]:
        """The names of the cosigners whose cosignature verified."""
        return tuple(w.name for w in self.witnesses if w.status == "verified")


def _seen(note: Note, cosigner: NoteVerifier) -> Seen:
    lines = [s for s in note.signatures if (s.name, s.key_id) == (cosigner.name, cosigner.key_id)]
    if not lines:
        return Seen(cosigner.name, cosigner.key_id, "absent")
    for line in lines:
        if cosigner.verify(note.text, line.signature):
            time = cosignature_time(line) if cosigner.kind == COSIGNATURE_V1 else None
            return Seen(cosigner.name, cosigner.key_id, "verified", time)
    return Seen(cosigner.name, cosigner.key_id, "invalid")


def open_head(
    note: str, public_key: Ed25519PublicKey, cosigners: Iterable[NoteVerifier] = ()
) -> SignedHead:
    """A signed tree head verified with the operator's key; ``ReceiptError`` if the operator
    did not sign it. Each of ``cosigners`` (witnesses' keys) is checked on its own: a
    cosignature that verifies is counted (``signed_by``, ``witnesses``), one that does not is
    reported ``invalid`` and not counted, without rejecting the operator's head."""
    try:
        text = _text_of(note)
        dataset_id = dataset_of(text.split("\n", 1)[0])
        operator = _verifier(dataset_id, public_key)
        parsed = parse_note(note)
        if not any(
            (s.name, s.key_id) == (operator.name, operator.key_id) for s in parsed.signatures
        ):
            raise ReceiptError("the head is not signed by the operator's key")
        checkpoint, verified = open_checkpoint(parsed, [operator])
    except NoteError as error:
        raise ReceiptError(f"the signed head does not verify: {error}") from None
    if not any(s.name == operator.name and s.key_id == operator.key_id for s in verified.verified):
        raise ReceiptError("the head is not signed by the operator's key")
    seen = tuple(_seen(parsed, c) for c in cosigners)
    signed_by = (
        *verified.signed_by,
        *(f"{w.name}+{w.key_id:08x}" for w in seen if w.status == "verified"),
    )
    return SignedHead(dataset_id, checkpoint.size, checkpoint.root_hash, signed_by, note, seen)


def check_receipt(
    receipt: Receipt, head: SignedHead, inclusion: list[bytes], public_key: Ed25519PublicKey
) -> None:
    """That the receipted entry is in the later signed ``head``, at its ``seq``, with its
    hash (``inclusion``: RFC 9162 ``PATH(seq - 1, D[head.size])``); ``ReceiptError`` naming
    the contradiction otherwise. Both notes are verified with ``public_key``."""
    open_receipt(receipt, public_key)
    if head.dataset_id != receipt.dataset_id:
        raise ReceiptError(
            f"the head is dataset {head.dataset_id}'s, the receipt dataset {receipt.dataset_id}'s"
        )
    if head.size < receipt.seq:
        raise ReceiptError(
            f"the operator signed a head of size {head.size}, behind the entry {receipt.seq} it "
            "gave a receipt for: the entry was dropped (or the head is older than the receipt)"
        )
    leaf = entry_leaf_hash(receipt.entry_hash)
    if not verify_inclusion(leaf, receipt.seq - 1, head.size, inclusion, head.root):
        raise ReceiptError(
            f"entry {receipt.seq} with hash {receipt.entry_hash[:16]}… is not in the signed head "
            f"of size {head.size}: the ledger the operator signs was rewritten at or before it"
        )


def check_extends(old: SignedHead, new: SignedHead, proof: list[bytes]) -> None:
    """That the tree of ``new`` extends the tree of ``old`` (same dataset), by the RFC 9162
    consistency ``proof``; ``ReceiptError`` otherwise."""
    if old.dataset_id != new.dataset_id:
        raise ReceiptError("the two heads are different datasets'")
    if new.size < old.size:
        raise ReceiptError(f"the newer head (size {new.size}) is smaller than {old.size}")
    if not verify_consistency(old.size, new.size, old.root, new.root, proof):
        raise ReceiptError(
            f"the head of size {new.size} does not extend the head of size {old.size} held "
            "earlier: the ledger was rewritten in between"
        )


def root_of_hashes(entry_hashes: list[str]) -> bytes:
    """The root of the tree over entries with these hashes (an export's), ``O(n)``."""
    if not entry_hashes:
        return EMPTY_ROOT
    frontier = Frontier()
    for h in entry_hashes:
        frontier.append_entry(h)
    return frontier.root()


def decode_proof(items: list[str]) -> list[bytes]:
    """A proof as served (hex or base64 strings) as 32-byte hashes."""
    out = []
    for item in items:
        raw = (
            bytes.fromhex(item) if _HEX64.fullmatch(item) else base64.b64decode(item, validate=True)
        )
        if len(raw) != 32:
            raise ReceiptError("a proof hash is 32 bytes")
        out.append(raw)
    return out
