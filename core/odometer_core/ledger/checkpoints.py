"""Signed checkpoints of a dataset's ledger head (Ed25519), and their offline audit.

Why: the hash chain proves that an export is internally consistent, not that it is the whole
history or the history the service really wrote. A server (or anyone with the database) can
drop the last entries, or rewrite an entry and re-hash everything after it, and the export
still verifies. A checkpoint is the operator's signature over ``(dataset, seq, head hash)``;
an auditor holding the operator's public key (obtained out of band, not from the server under
audit) then sees truncation (the export ends before a signed ``seq``) and rewriting (the
export's hash at a signed ``seq`` differs).

The signed statement is the canonical JSON (:func:`odometer_core.ledger.chain.canonical_bytes`) of::

    {"type": "odometer.ledger-checkpoint.v1", "dataset_id", "seq", "head_hash",
     "signed_at", "key_id"}

``type`` separates these signatures from anything else the key might ever sign; ``key_id``
is the first 32 hex digits of the SHA-256 of the raw 32-byte public key.

The same statement, signed at the end of every export, is the export's closing head
(:mod:`odometer_core.ledger.formats`): :func:`pin_end` tells ``odometer verify`` whether a head
signed by the auditor's key pins the export's last entry, so that no line can be cut off its
end unnoticed.

This module is the pure half (keys, statements, signatures, the offline audit), shared by the
service and the offline verifier; recording and serving checkpoints is
:mod:`app.services.checkpoints`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from odometer_core.accounting.json_types import (
    CheckpointAuditSummary,
    CheckpointRecord,
    EndPinJSON,
)
from odometer_core.ledger.chain import canonical_bytes

STATEMENT_TYPE: Final = "odometer.ledger-checkpoint.v1"
ALGORITHM: Final = "Ed25519"
#: The statement's fields besides ``type``, in the order a checkpoint is shown.
STATEMENT_FIELDS: Final = ("dataset_id", "seq", "head_hash", "signed_at", "key_id")


# ---------------------------------------------------------------------------- keys
def key_fingerprint(public_key: Ed25519PublicKey) -> str:
    """The fingerprint auditors pin: SHA-256 of the raw public key, 128 bits in hex."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:32]


def public_pem(public_key: Ed25519PublicKey) -> str:
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    """An Ed25519 private key from unencrypted PEM (``ValueError`` for anything else)."""
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("the checkpoint key must be an Ed25519 private key")
    return key


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (``ValueError`` for anything else)."""
    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("the checkpoint public key must be an Ed25519 key")
    return key


def generate_key_pem() -> tuple[bytes, Ed25519PublicKey]:
    """A new private key as PKCS#8 PEM, and its public key."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return pem, key.public_key()


@dataclass(frozen=True, slots=True)
class Signer:
    """The operator's checkpoint key and policy: sign the head when ``seq % every == 0``."""

    private_key: Ed25519PrivateKey
    every: int

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self.private_key.public_key()

    @property
    def key_id(self) -> str:
        return key_fingerprint(self.public_key)

    def derived_key(self, label: bytes) -> bytes:
        """A 32-byte secret for another use of the operator's key, named by ``label``: the
        SHA-256 of the label and the private key's raw bytes (distinct labels give unrelated
        secrets, and none reveals the key; a signature is never made with it)."""
        raw = self.private_key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        return hashlib.sha256(label + b"\x00" + raw).digest()

    def due(self, seq: int) -> bool:
        """Whether the head at ``seq`` is signed by policy (on append)."""
        return seq % self.every == 0

    def sign(self, dataset_id: str, seq: int, head_hash: str, signed_at: str) -> str:
        """The base64 signature over the statement of ``(dataset, seq, head hash)``."""
        return sign(self, dataset_id, seq, head_hash, signed_at)

    def checkpoint(
        self, dataset_id: str, seq: int, head_hash: str, signed_at: str
    ) -> CheckpointRecord:
        """The checkpoint of ``(dataset, seq, head hash)`` signed at ``signed_at``, as stored
        and served: the statement's fields and the signature."""
        return {
            "dataset_id": dataset_id,
            "seq": seq,
            "head_hash": head_hash,
            "signed_at": signed_at,
            "key_id": self.key_id,
            "signature": sign(self, dataset_id, seq, head_hash, signed_at),
        }


@lru_cache(maxsize=8)
def signer_from_file(path: str, every: int) -> Signer:
    """The signer whose PEM private key is at ``path`` (read once per process and path)."""
    return Signer(load_private_key(Path(path).read_bytes()), every)


# ---------------------------------------------------------------------------- statements
def statement(
    *, dataset_id: Any, seq: Any, head_hash: Any, signed_at: Any, key_id: Any
) -> dict[str, Any]:
    """What is signed (the module docstring's form); fields as given, so a tampered one
    changes the message and the signature no longer verifies."""
    return {
        "type": STATEMENT_TYPE,
        "dataset_id": dataset_id,
        "seq": seq,
        "head_hash": head_hash,
        "signed_at": signed_at,
        "key_id": key_id,
    }


def sign(signer: Signer, dataset_id: str, seq: int, head_hash: str, signed_at: str) -> str:
    """The base64 signature over the statement."""
    message = canonical_bytes(
        statement(
            dataset_id=dataset_id,
            seq=seq,
            head_hash=head_hash,
            signed_at=signed_at,
            key_id=signer.key_id,
        )
    )
    return base64.b64encode(signer.private_key.sign(message)).decode("ascii")


def signature_problem(checkpoint: Mapping[str, Any], public_key: Ed25519PublicKey) -> str | None:
    """Why ``checkpoint`` (as served: statement fields + ``signature``) is not a valid
    signature of ``public_key`` over its own statement, or ``None`` if it is."""
    missing = [f for f in (*STATEMENT_FIELDS, "signature") if f not in checkpoint]
    if missing:
        return f"missing field(s): {', '.join(missing)}"
    if checkpoint["key_id"] != key_fingerprint(public_key):
        return f"signed with key {checkpoint['key_id']!r}, not the given public key"
    try:
        signature = base64.b64decode(str(checkpoint["signature"]), validate=True)
        message = canonical_bytes(statement(**{f: checkpoint[f] for f in STATEMENT_FIELDS}))
        public_key.verify(signature, message)
    except (InvalidSignature, binascii.Error, TypeError, ValueError):
        return "the signature does not verify"
    return None


# ---------------------------------------------------------------------------- audit
def read_checkpoints(text: str) -> list[dict[str, Any]]:
    """Checkpoints from JSON lines, a JSON list, or the JSON of ``GET …/checkpoints``."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError:
        doc = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    if isinstance(doc, dict):
        doc = doc.get("checkpoints", [doc])
    if not isinstance(doc, list) or not all(isinstance(c, dict) for c in doc):
        raise ValueError("a checkpoints file holds JSON objects")
    return doc


class CheckpointAudit:
    """Checks an export against signed checkpoints while it streams.

    Signatures are checked up front; :meth:`see` compares each entry at a signed ``seq``;
    :meth:`finish` reports checkpoints the export never reached (truncation).
    """

    def __init__(self, checkpoints: Iterable[Mapping[str, Any]], public_key: Ed25519PublicKey):
        self.problems: list[str] = []
        self.signed = 0
        self.matched = 0
        self._wanted: dict[int, Mapping[str, Any]] = {}
        for index, checkpoint in enumerate(checkpoints, start=1):
            problem = signature_problem(checkpoint, public_key)
            if problem is not None:
                seq = checkpoint.get("seq")
                self.problems.append(f"checkpoint {index} (seq {seq!r}): {problem}")
                continue
            self.signed += 1
            self._wanted[int(checkpoint["seq"])] = checkpoint
        self.key_id = key_fingerprint(public_key)
        self.newest = max(self._wanted, default=0)
        #: The last position whose entry had a signed checkpoint, and the last that matched it.
        self.last_seen = 0
        self.last_matched = 0

    def see(self, position: int, entry: Mapping[str, Any]) -> None:
        """The export's entry at ``position`` (= its seq in a sound chain)."""
        checkpoint = self._wanted.get(position)
        if checkpoint is None:
            return
        self.last_seen = position
        if checkpoint["dataset_id"] != entry.get("dataset_id"):
            self.problems.append(
                f"entry {position}: signed checkpoint is for dataset "
                f"{checkpoint['dataset_id']!r}, the export for {entry.get('dataset_id')!r}"
            )
        elif checkpoint["head_hash"] != entry.get("hash"):
            self.problems.append(
                f"entry {position}: hash differs from the signed checkpoint for seq {position} "
                f"(signed {checkpoint['head_hash']}, export {entry.get('hash')}): the history "
                "was rewritten"
            )
        else:
            self.matched += 1
            self.last_matched = position

    def finish(self, entries: int) -> list[str]:
        """All problems, including truncation (the export ends before a signed seq)."""
        if self.newest > entries:
            self.problems.append(
                f"export ends at seq {entries} but a signed checkpoint exists for seq "
                f"{self.newest} > {entries}: the export is truncated"
            )
        return self.problems

    def summary(self) -> CheckpointAuditSummary:
        return {
            "key_id": self.key_id,
            "signed": self.signed,
            "matched": self.matched,
            "newest_seq": self.newest,
        }


# ---------------------------------------------------------------------------- the export's end
@dataclass(frozen=True, slots=True)
class EndPin:
    """Whether a signed head pins the end of an export (``odometer verify``).

    The hash chain cannot tell an export from one with its last entries cut off. What can is a
    head signed by the operator's key, checked with the public key the auditor holds: the
    export's closing head (``odometer_core.ledger.formats``) or a checkpoint
    (``--checkpoints``) at its last entry. ``problems`` are contradictions (a closing head
    that is not the last entry, a signature that does not verify): the export fails whatever
    the auditor accepts. ``reason`` says why the end is not pinned when nothing contradicts it
    (an unsigned service, no key given, an export without a closing head): it fails unless
    the auditor accepts an unpinned end (``--unpinned``).
    """

    pinned: bool
    by: str | None
    key_id: str | None
    reason: str | None
    problems: tuple[str, ...] = ()

    def to_json(self) -> EndPinJSON:
        return {"pinned": self.pinned, "by": self.by, "key_id": self.key_id, "reason": self.reason}


def pin_end(
    *,
    entries: int,
    last: Mapping[str, Any] | None,
    head: Mapping[str, Any] | None,
    public_key: Ed25519PublicKey | None,
    checkpoints: CheckpointAudit | None = None,
) -> EndPin:
    """Whether ``head`` (the export's closing head, ``None`` if it has none) or a matched
    checkpoint pins the export's end: its last entry ``last`` (the ``entries``-th)."""
    dataset = last.get("dataset_id") if last is not None else None
    last_hash = last.get("hash") if last is not None else None
    key_id = key_fingerprint(public_key) if public_key is not None else None
    if head is not None:
        seq, signed_hash = head.get("seq"), head.get("head_hash")
        if head.get("dataset_id") != dataset:
            problem = (
                f"the export's closing head is for dataset {head.get('dataset_id')!r}, its "
                f"entries for {dataset!r}"
            )
            return EndPin(False, None, key_id, None, (problem,))
        if isinstance(seq, int) and not isinstance(seq, bool) and seq > entries:
            problem = (
                f"the export ends at seq {entries} but its closing head is seq {seq}: the "
                f"entries after seq {entries} were cut off"
            )
            return EndPin(False, None, key_id, None, (problem,))
        if seq != entries or signed_hash != last_hash:
            problem = (
                f"the export's closing head (seq {seq!r}, hash {signed_hash!r}) is not its last "
                f"entry (seq {entries}, hash {last_hash!r}): entries were added or changed "
                "after it was written"
            )
            return EndPin(False, None, key_id, None, (problem,))
        if head.get("signature") is None:
            reason = (
                "the service that wrote this export signs no heads (it has no "
                "ODOMETER_CHECKPOINT_KEY): nothing pins the export's end"
            )
        elif public_key is None:
            reason = (
                f"the export's closing head is signed by key {head.get('key_id')!r}, but no "
                "--public-key was given to check it: pass the operator's public key "
                "(obtained out of band)"
            )
        else:
            bad = signature_problem(head, public_key)
            if bad is not None:
                return EndPin(False, None, key_id, None, (f"the export's closing head: {bad}",))
            return EndPin(True, "closing head", key_id, None)
    else:
        reason = (
            "the export does not end with its head: its last lines may have been cut off (or "
            "it was written by an older service, before exports ended with their signed head)"
        )
    if checkpoints is not None and entries and checkpoints.last_matched == entries:
        return EndPin(True, "checkpoint", checkpoints.key_id, None)
    return EndPin(False, None, key_id, reason)
