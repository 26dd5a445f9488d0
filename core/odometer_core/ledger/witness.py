"""The witness: every dataset's ledger head, recorded outside the database.

Why: the hash chain and the signed checkpoints say nothing when the whole database goes back in
time (an operator restores last night's backup): the restored ledgers are sound, only shorter,
and every budget spent since could be spent again. The service therefore records each
committed head ``(dataset, seq, head hash)`` somewhere the database's backup does not cover, and
a dataset whose database head is behind its witnessed head is frozen for writes
(:mod:`app.services.witness`).

The directory format (``odometer.ledger-witness.v1``), one JSON file per dataset::

    <dir>/FORMAT                       "odometer.ledger-witness.v1\\n"
    <dir>/datasets/<quoted id>.json    the dataset's witnessed head (below)
    <dir>/locks/<quoted id>.lock       empty; flock(2)ed by writers

    {"type": "odometer.ledger-witness.v1", "dataset_id", "seq", "head_hash", "epoch",
     "witnessed_at", "key_id", "signature"}

``epoch`` counts the losses acknowledged on the dataset (``loss_acknowledged`` entries): a
record orders by ``(epoch, seq)``, and an ordinary write keeps the file's epoch, so after an
acknowledged loss the head moves back once, on purpose, and never otherwise. ``key_id`` and
``signature`` are null without a checkpoint key; with one, ``signature`` is the checkpoint
signature (:mod:`odometer_core.ledger.checkpoints`) over ``(dataset_id, seq, head_hash,
signed_at = witnessed_at, key_id)``, so an auditor verifies a witness file as a checkpoint.

Writers (several server processes may share the directory) take the dataset's lock file,
read the record, and replace it only by a larger ``seq`` (a temporary file written, fsynced and
renamed over it, then the directory fsynced): two writers racing never let the smaller head
win. Readers take no lock: a rename is atomic, so they see the old record or the new one.

Given a key of its own, the witness also cosigns the operator's signed tree heads
(``<dir>/cosigned``: :mod:`odometer_core.ledger.cosign`).

This module is the pure half (the format, the directory store, the comparisons); where the
service writes and checks it is :mod:`app.services.witness`. Another backend (an object store
with conditional writes) implements :class:`WitnessStore`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import quote

from odometer_core.accounting.json_types import CosignedJSON, WitnessedJSON
from odometer_core.ledger.checkpoints import Signer
from odometer_core.ledger.merkle import verify_consistency
from odometer_core.ledger.notes import (
    COSIGNATURE_V1,
    NoteError,
    NoteSigner,
    NoteVerifier,
    open_checkpoint,
    parse_note,
    sign_note,
)
from odometer_core.ledger.receipts import dataset_of, origin

WITNESS_TYPE: Final = "odometer.ledger-witness.v1"
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Witnessed:
    """A dataset's witnessed head, as stored."""

    dataset_id: str
    seq: int
    head_hash: str
    epoch: int = 0
    witnessed_at: str | None = None
    key_id: str | None = None
    signature: str | None = None

    def to_json(self) -> WitnessedJSON:
        return {
            "type": WITNESS_TYPE,
            "dataset_id": self.dataset_id,
            "seq": self.seq,
            "head_hash": self.head_hash,
            "epoch": self.epoch,
            "witnessed_at": self.witnessed_at,
            "key_id": self.key_id,
            "signature": self.signature,
        }

    def checkpoint(self) -> dict[str, Any]:
        """The record as a signed checkpoint (``odometer verify --checkpoints`` reads it)."""
        return {
            "dataset_id": self.dataset_id,
            "seq": self.seq,
            "head_hash": self.head_hash,
            "signed_at": self.witnessed_at,
            "key_id": self.key_id,
            "signature": self.signature,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Witnessed:
        if doc.get("type") != WITNESS_TYPE:
            raise ValueError(f"not a {WITNESS_TYPE} record: type {doc.get('type')!r}")
        seq, epoch = doc.get("seq"), doc.get("epoch", 0)
        if type(seq) is not int or seq < 0 or type(epoch) is not int or epoch < 0:
            raise ValueError("a witness record's seq and epoch are non-negative integers")
        return cls(
            dataset_id=str(doc["dataset_id"]),
            seq=seq,
            head_hash=str(doc["head_hash"]),
            epoch=epoch,
            witnessed_at=doc.get("witnessed_at"),
            key_id=doc.get("key_id"),
            signature=doc.get("signature"),
        )


def signed(record: Witnessed, signer: Signer | None) -> Witnessed:
    """``record`` signed with the checkpoint key (unchanged without one)."""
    if signer is None or record.witnessed_at is None:
        return record
    signature = signer.sign(record.dataset_id, record.seq, record.head_hash, record.witnessed_at)
    return Witnessed(
        record.dataset_id,
        record.seq,
        record.head_hash,
        record.epoch,
        record.witnessed_at,
        signer.key_id,
        signature,
    )


@dataclass(frozen=True, slots=True)
class Head:
    """A committed head to witness."""

    dataset_id: str
    seq: int
    head_hash: str


class WitnessStore(Protocol):
    """Where witnessed heads live. ``advance`` must be atomic per dataset and never replace a
    record by one of a smaller ``(epoch, seq)``; ``supersede`` is the one way back (an
    acknowledged loss)."""

    def advance(self, heads: Iterable[Head], at: str, signer: Signer | None) -> list[Witnessed]:
        """Record each head unless the witness holds a larger ``seq`` (of the same epoch);
        returns the records found at the *same* seq with another hash (a fork)."""
        ...

    def supersede(
        self, head: Head, at: str, signer: Signer | None, *, expected: Witnessed | None
    ) -> Witnessed:
        """Replace the dataset's record by ``head`` at the next epoch, if the record is still
        ``expected`` (``ValueError`` otherwise)."""
        ...

    def get(self, dataset_id: str) -> Witnessed | None: ...

    def records(self) -> Iterator[Witnessed]: ...


def _name(dataset_id: str) -> str:
    return quote(dataset_id, safe="") or "%00"


class DirectoryWitness:
    """The witness in a directory (local, or a shared file system with working ``flock``)."""

    def __init__(
        self, path: str | Path, *, fsync: bool = True, cosigner: NoteSigner | None = None
    ) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._heads = self.path / "datasets"
        self._locks = self.path / "locks"
        self._heads.mkdir(parents=True, exist_ok=True)
        self._locks.mkdir(parents=True, exist_ok=True)
        marker = self.path / "FORMAT"
        if not marker.exists():
            marker.write_text(WITNESS_TYPE + "\n", "ascii")
        elif marker.read_text("ascii").strip() != WITNESS_TYPE:
            raise ValueError(f"{marker}: not a {WITNESS_TYPE} directory")
        #: with a key of its own, the heads this witness cosigned (``<dir>/cosigned``)
        self.cosigned: CosignedHeads | None = None
        if cosigner is not None:
            self.cosigned = CosignedHeads(self.path / "cosigned", cosigner, fsync=fsync)

    # ------------------------------------------------------------------ reading
    def get(self, dataset_id: str) -> Witnessed | None:
        return self._read(self._heads / f"{_name(dataset_id)}.json")

    def records(self) -> Iterator[Witnessed]:
        for path in sorted(self._heads.glob("*.json")):
            record = self._read(path)
            if record is not None:
                yield record

    @staticmethod
    def _read(path: Path) -> Witnessed | None:
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            return None
        return Witnessed.from_json(json.loads(text))

    # ------------------------------------------------------------------ writing
    def advance(self, heads: Iterable[Head], at: str, signer: Signer | None) -> list[Witnessed]:
        forks: list[Witnessed] = []
        for head in sorted(heads, key=lambda h: h.dataset_id):  # lock order: no deadlock
            with self._locked(head.dataset_id):
                current = self.get(head.dataset_id)
                if current is not None and current.seq > head.seq:
                    continue  # a larger head is witnessed (a racing writer, or a loss)
                if current is not None and current.seq == head.seq:
                    if current.head_hash != head.head_hash:
                        forks.append(current)
                    continue
                epoch = 0 if current is None else current.epoch
                self._write(signed(Witnessed(*_fields(head), epoch, at), signer))
        return forks

    def supersede(
        self, head: Head, at: str, signer: Signer | None, *, expected: Witnessed | None
    ) -> Witnessed:
        with self._locked(head.dataset_id):
            current = self.get(head.dataset_id)
            if current != expected:
                raise ValueError(
                    f"the witness of dataset '{head.dataset_id}' changed meanwhile "
                    f"(now {None if current is None else current.to_json()})"
                )
            epoch = 0 if current is None else current.epoch + 1
            record = signed(Witnessed(*_fields(head), epoch, at), signer)
            self._write(record)
            return record

    def _locked(self, dataset_id: str) -> _Flock:
        return _Flock(self._locks / f"{_name(dataset_id)}.lock")

    def _write(self, record: Witnessed) -> None:
        _replace(self._heads, record.dataset_id, record.to_json(), fsync=self.fsync)


def _replace(directory: Path, dataset_id: str, doc: Mapping[str, Any], *, fsync: bool) -> None:
    """``<directory>/<quoted id>.json`` replaced by ``doc``, atomically: a temporary file
    written (and fsynced) and renamed over it, then the directory fsynced."""
    body = json.dumps(doc, sort_keys=True).encode("utf-8") + b"\n"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
            out.flush()
            if fsync:
                os.fsync(out.fileno())
        os.replace(tmp, directory / f"{_name(dataset_id)}.json")
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if fsync:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fields(head: Head) -> tuple[str, int, str]:
    return head.dataset_id, head.seq, head.head_hash


class _Flock:
    """An exclusive ``flock`` on a lock file, for a ``with`` block."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)


# ---------------------------------------------------------------------------- comparisons
def read_directory(path: str | Path) -> dict[str, Witnessed]:
    """Every record of a witness directory (an auditor's copy), by dataset; never creates one."""
    root = Path(path)
    marker = root / "FORMAT"
    if not marker.is_file() or marker.read_text("ascii").strip() != WITNESS_TYPE:
        raise ValueError(f"{root}: not a witness directory ({WITNESS_TYPE}: no FORMAT file)")
    out: dict[str, Witnessed] = {}
    for file in sorted((root / "datasets").glob("*.json")):
        record = Witnessed.from_json(json.loads(file.read_bytes()))
        if _name(record.dataset_id) != file.stem:
            raise ValueError(f"{file}: holds dataset {record.dataset_id!r}")
        out[record.dataset_id] = record
    return out


class WitnessAudit:
    """Checks an export (streamed) against a dataset's witnessed head: the export reaches the
    witnessed ``seq`` and has the witnessed hash there."""

    def __init__(self, record: Witnessed) -> None:
        self.record = record
        self.problems: list[str] = []
        self.matched = False

    def see(self, position: int, entry: Mapping[str, Any]) -> None:
        if position != self.record.seq:
            return
        if entry.get("dataset_id") != self.record.dataset_id:
            self.problems.append(
                f"entry {position}: the witness is for dataset {self.record.dataset_id!r}, "
                f"the export for {entry.get('dataset_id')!r}"
            )
        elif entry.get("hash") != self.record.head_hash:
            self.problems.append(
                f"entry {position}: hash differs from the witnessed head (witnessed "
                f"{self.record.head_hash}, export {entry.get('hash')}): another history"
            )
        else:
            self.matched = True

    def finish(self, entries: int) -> list[str]:
        if entries < self.record.seq:
            self.problems.append(
                f"export ends at seq {entries} but the witness holds seq {self.record.seq} for "
                f"dataset {self.record.dataset_id!r}: the export (or the database it came "
                "from) is behind the witness"
            )
        return self.problems


# ---------------------------------------------------------------------------- cosigning
COSIGNED_TYPE: Final = "odometer.cosigned-head.v1"


class CosignRefused(ValueError):
    """A head the witness does not cosign (unsigned, another dataset's, or not extending the
    last head it cosigned in the same epoch)."""


@dataclass(frozen=True, slots=True)
class Cosigned:
    """The last head the witness cosigned for a dataset."""

    dataset_id: str
    epoch: int
    size: int
    root: bytes
    cosigned_at: int
    note: str

    def to_json(self) -> CosignedJSON:
        return {
            "type": COSIGNED_TYPE,
            "dataset_id": self.dataset_id,
            "epoch": self.epoch,
            "size": self.size,
            "root": self.root.hex(),
            "cosigned_at": self.cosigned_at,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Cosigned:
        if doc.get("type") != COSIGNED_TYPE:
            raise ValueError(f"not a {COSIGNED_TYPE} record")
        size, epoch, at = doc.get("size"), doc.get("epoch"), doc.get("cosigned_at")
        root = doc.get("root")
        if not all(type(v) is int and v >= 0 for v in (size, epoch, at)):
            raise ValueError("a cosigned head's size, epoch and time are integers >= 0")
        if not isinstance(root, str) or _HEX64.fullmatch(root) is None:
            raise ValueError("a cosigned head's root is 64 hex digits")
        return cls(str(doc["dataset_id"]), epoch, size, bytes.fromhex(root), at, str(doc["note"]))  # type: ignore[arg-type]


def cosigner_key(text: str) -> NoteSigner:
    """The witness's cosigning key from its signer key text (``PRIVATE+KEY+name+ID+…``, as
    ``odometer witness-keygen`` writes it)."""
    return NoteSigner.from_skey(text.strip(), COSIGNATURE_V1)


class CosignedHeads:
    """The heads a witness cosigned, one file per dataset, and its key."""

    def __init__(self, path: str | Path, signer: NoteSigner, *, fsync: bool = True) -> None:
        if signer.kind != COSIGNATURE_V1:
            raise ValueError("the witness cosigns with a cosignature v1 key (type 0x04)")
        self.path = Path(path)
        self.signer = signer
        self.fsync = fsync
        self._locks = self.path / "locks"
        self._locks.mkdir(parents=True, exist_ok=True)

    @property
    def verifier(self) -> NoteVerifier:
        return self.signer.verifier

    def get(self, dataset_id: str) -> Cosigned | None:
        try:
            text = (self.path / f"{_name(dataset_id)}.json").read_bytes()
        except FileNotFoundError:
            return None
        return Cosigned.from_json(json.loads(text))

    def records(self) -> list[Cosigned]:
        return [
            Cosigned.from_json(json.loads(p.read_bytes())) for p in sorted(self.path.glob("*.json"))
        ]

    def cosign(
        self,
        note: str,
        operator: NoteVerifier,
        *,
        epoch: int,
        proof: Iterable[bytes],
        timestamp: int,
    ) -> Cosigned:
        """Cosign the operator's signed head ``note`` at ``timestamp`` (POSIX seconds), if it
        extends the last head cosigned for its dataset in ``epoch`` (``proof``: RFC 9162
        ``PROOF(last size, D[size])``; ignored when nothing was cosigned in this epoch);
        :class:`CosignRefused` otherwise. A head already cosigned at the same size and root
        is returned as it is."""
        try:
            checkpoint, _ = open_checkpoint(note, [operator])
            dataset_id = dataset_of(checkpoint.origin)
        except (NoteError, ValueError) as error:
            raise CosignRefused(f"not a head signed by the operator: {error}") from None
        if operator.name != origin(dataset_id):
            raise CosignRefused("the operator's key is not named after the head's log")
        proof = list(proof)
        with _Flock(self._locks / f"{_name(dataset_id)}.lock"):
            last = self.get(dataset_id)
            if last is not None and last.epoch > epoch:
                raise CosignRefused(
                    f"dataset {dataset_id}: the witness is at epoch {last.epoch}, not {epoch}"
                )
            if last is not None and last.epoch == epoch:
                if (last.size, last.root) == (checkpoint.size, checkpoint.root_hash):
                    return last
                if not verify_consistency(
                    last.size, checkpoint.size, last.root, checkpoint.root_hash, proof
                ):
                    raise CosignRefused(
                        f"dataset {dataset_id}: the head of size {checkpoint.size} does not "
                        f"extend the head of size {last.size} cosigned before (epoch {epoch})"
                    )
            cosigned = sign_note(parse_note(note), self.signer, timestamp=timestamp)
            record = Cosigned(
                dataset_id, epoch, checkpoint.size, checkpoint.root_hash, timestamp, cosigned
            )
            self._write(record)
            return record

    def _write(self, record: Cosigned) -> None:
        _replace(self.path, record.dataset_id, record.to_json(), fsync=self.fsync)
