"""Signed checkpoints of a dataset's ledger head (Ed25519), and their offline audit.

Why: the hash chain proves that an export is internally consistent, not that it is the whole
history or the history the service really wrote. A server (or anyone with the database) can
drop the last entries, or rewrite an entry and re-hash everything after it, and the export
still verifies. A checkpoint is the operator's signature over ``(dataset, seq, head hash)``;
an auditor holding the operator's public key (obtained out of band, not from the server under
audit) then sees truncation (the export ends before a signed ``seq``) and rewriting (the
export's hash at a signed ``seq`` differs).

The signed statement is the canonical JSON (:func:`app.ledger_chain.canonical_bytes`) of::

    {"type": "odometer.ledger-checkpoint.v1", "dataset_id", "seq", "head_hash",
     "signed_at", "key_id"}

``type`` separates these signatures from anything else the key might ever sign; ``key_id``
is the first 32 hex digits of the SHA-256 of the raw 32-byte public key.

Configuration (:class:`app.settings.Settings`): ``ODOMETER_CHECKPOINT_KEY`` (PEM private key
path; unset = checkpoints disabled, never a throw-away key an auditor could not pin) and
``ODOMETER_CHECKPOINT_EVERY`` (sign when ``seq % N == 0``, in the transaction of the append).
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
from sqlalchemy.exc import IntegrityError

from app.db.models import Dataset, LedgerCheckpoint, LedgerEntry
from app.db.repositories import CheckpointRepository
from app.db.uow import UnitOfWork
from app.ledger_chain import canonical_bytes
from app.services import _aggregate  # module import: _aggregate imports this module too
from app.services._common import utc_now
from app.services.errors import ConcurrentUpdate, ServiceError
from app.services.principals import Principal
from app.settings import Settings, get_settings

STATEMENT_TYPE: Final = "odometer.ledger-checkpoint.v1"
ALGORITHM: Final = "Ed25519"
#: The statement's fields besides ``type``, in the order a checkpoint is shown.
STATEMENT_FIELDS: Final = ("dataset_id", "seq", "head_hash", "signed_at", "key_id")


class CheckpointsDisabled(ServiceError):
    """Signing asked for, but no checkpoint key is configured on this server (409: the
    request is valid, this server's configuration cannot apply it)."""

    code = "CheckpointsDisabled"


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
    """The operator's checkpoint key and policy."""

    private_key: Ed25519PrivateKey
    every: int

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self.private_key.public_key()

    @property
    def key_id(self) -> str:
        return key_fingerprint(self.public_key)


@lru_cache(maxsize=8)
def _signer_from_file(path: str, every: int) -> Signer:
    return Signer(load_private_key(Path(path).read_bytes()), every)


def signer_from_settings(settings: Settings) -> Signer | None:
    """The configured signer, or ``None`` when checkpoints are disabled (key unset)."""
    path = (settings.checkpoint_key or "").strip()
    if not path:
        return None
    return _signer_from_file(path, settings.checkpoint_every)


_active: list[Signer | None] = []


def configure(signer: Signer | None) -> None:
    """Set the process's signer (the app factory does, from its settings); until then the
    environment's settings decide. Writes in one process share one key and policy."""
    _active[:] = [signer]


def active_signer() -> Signer | None:
    if not _active:
        configure(signer_from_settings(get_settings()))
    return _active[0]


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


def to_json(row: LedgerCheckpoint) -> dict[str, Any]:
    return {
        "dataset_id": row.dataset_id,
        "seq": row.seq,
        "head_hash": row.head_hash,
        "signed_at": row.signed_at,
        "key_id": row.key_id,
        "algorithm": ALGORITHM,
        "signature": row.signature,
    }


# ---------------------------------------------------------------------------- service
def _record(
    uow: UnitOfWork, signer: Signer, dataset_id: str, seq: int, head_hash: str, at: str
) -> LedgerCheckpoint:
    row = LedgerCheckpoint(
        dataset_id=dataset_id,
        seq=seq,
        head_hash=head_hash,
        signed_at=at,
        key_id=signer.key_id,
        signature=sign(signer, dataset_id, seq, head_hash, at),
    )
    CheckpointRepository(uow.session).add(row)
    return row


def after_append(uow: UnitOfWork, ds: Dataset, entry: LedgerEntry) -> None:
    """Sign the new head when its ``seq`` is a multiple of the policy's ``every`` (called by
    ``append_entry``, so the checkpoint commits or rolls back with the entry)."""
    signer = active_signer()
    if signer is not None and entry.seq % signer.every == 0:
        _record(uow, signer, ds.id, entry.seq, entry.hash, entry.at)


def public_key_info() -> dict[str, Any]:
    """The verification key (PEM and fingerprint), for ``GET /v1/checkpoint-key``; with
    ``enabled`` false and nulls when this server signs no checkpoints."""
    signer = active_signer()
    if signer is None:
        return {
            "enabled": False,
            "algorithm": ALGORITHM,
            "key_id": None,
            "public_key": None,
            "every": None,
        }
    return {
        "enabled": True,
        "algorithm": ALGORITHM,
        "key_id": signer.key_id,
        "public_key": public_pem(signer.public_key),
        "every": signer.every,
    }


def list_checkpoints(
    uow: UnitOfWork, principal: Principal, dataset_id: str, *, after_seq: int, limit: int
) -> dict[str, Any]:
    """A dataset's checkpoints, oldest first (same visibility as its ledger)."""
    with uow.read_only():
        _aggregate.visible_dataset(uow, principal, dataset_id, lock=False)
        rows = CheckpointRepository(uow.session).page(dataset_id, after_seq=after_seq, limit=limit)
        return {"dataset_id": dataset_id, "checkpoints": [to_json(r) for r in rows]}


def checkpoint_head(
    uow: UnitOfWork, principal: Principal, dataset_id: str
) -> tuple[dict[str, Any], bool]:
    """Sign the dataset's current head now; ``(checkpoint, created)``. Signing a head that
    already has a checkpoint under this key returns that one (``created`` false)."""
    signer = active_signer()
    with uow:
        ds = _aggregate.visible_dataset(uow, principal, dataset_id, lock=False)
        if signer is None:  # after the visibility check: no existence leak
            raise CheckpointsDisabled(
                "checkpoint signing is not configured on this server (ODOMETER_CHECKPOINT_KEY)"
            )
        repo = CheckpointRepository(uow.session)
        existing = repo.get(ds.id, ds.last_seq, signer.key_id)
        if existing is not None:
            return to_json(existing), False
        row = _record(uow, signer, ds.id, ds.last_seq, ds.head_hash, utc_now())
        body = to_json(row)
        try:
            uow.commit()
        except IntegrityError:
            raise ConcurrentUpdate("the same head was signed concurrently; retry") from None
    return body, True


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
        self._dataset: object = None
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

    def see(self, position: int, entry: Mapping[str, Any]) -> None:
        """The export's entry at ``position`` (= its seq in a sound chain)."""
        if position == 1:
            self._dataset = entry.get("dataset_id")
        checkpoint = self._wanted.get(position)
        if checkpoint is None:
            return
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

    def finish(self, entries: int) -> list[str]:
        """All problems, including truncation (the export ends before a signed seq)."""
        if self.newest > entries:
            self.problems.append(
                f"export ends at seq {entries} but a signed checkpoint exists for seq "
                f"{self.newest} > {entries}: the export is truncated"
            )
        return self.problems

    def summary(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "signed": self.signed,
            "matched": self.matched,
            "newest_seq": self.newest,
        }
