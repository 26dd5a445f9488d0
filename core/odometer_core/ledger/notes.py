"""Signed notes (C2SP ``signed-note``) and tree heads in them (C2SP ``tlog-checkpoint``).

Why: a tree head (:mod:`odometer_core.ledger.merkle`) is worth what its signatures are worth,
and the people who keep heads for others (the witnesses of Certificate Transparency, Go's
checksum database and Sigstore) read one text form: the signed note of
https://c2sp.org/signed-note with the checkpoint body of https://c2sp.org/tlog-checkpoint.
Using it, a head this service signs can be cosigned by a witness that knows nothing of it,
and checked by their tools as well as by ``odometer verify``.

A signed note is a text ending in a newline, a blank line, and one or more signature lines::

    <text, ending in "\\n">
    <blank line>
    — <key name> <base64(4-byte key ID || signature)>

(em dash U+2014, space, name, space, base64, newline). The whole note is UTF-8 without ASCII
control characters other than newline; a key name is non-empty, with no Unicode space and no
``+``. The key ID of an Ed25519 key is ``SHA-256(key name || 0x0A || 0x01 || 32-byte public
key)[:4]``, big-endian; the signature is Ed25519 (RFC 8032) over the text, final newline
included. A verifier knows keys by ``(name, key ID)``: signatures by unknown keys are
ignored (and reported as such: :attr:`VerifiedNote.unverified`), a signature by a known key
that does not verify rejects the note, and so does a note that no known key signed. Several
known keys may sign one note (a log's key and witnesses' keys, or two operators' keys): the
verified ones are :attr:`VerifiedNote.verified`, which is how "who saw this head" is told.

A checkpoint's text is three or more non-empty lines: the **origin** (the log's name), the
**tree size** in decimal without leading zeros, the **root hash** in base64, then optional
**extension lines** (opaque; C2SP recommends none).

Keys: the operator's checkpoint key (:class:`odometer_core.ledger.checkpoints.Signer`) signs
notes as it is (:meth:`NoteSigner.from_checkpoint_signer`); a note key also has the text forms
of Go's ``golang.org/x/mod/sumdb/note`` (:meth:`NoteVerifier.vkey` ``name+hex ID+base64(0x01
|| public key)``, :meth:`NoteSigner.skey`), which witnesses are configured with.

Witnesses answer with the timestamped cosignatures of c2sp.org/tlog-cosignature (signature
type 0x04, Ed25519 over ``cosignature/v1``, ``time <T>`` and the checkpoint's text, the 8-byte
time before the signature): a verifier of that ``kind`` checks them, and
:attr:`VerifiedNote.times` says when each witness states it saw the head. (The ML-DSA-44
cosignatures of the same document are not supported; their lines stay unverified.)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from odometer_core.ledger.checkpoints import Signer

#: The signature type byte of Ed25519 in c2sp.org/signed-note.
ED25519: Final = 0x01
#: The signature type byte of timestamped Ed25519 witness cosignatures (c2sp.org/tlog-cosignature).
COSIGNATURE_V1: Final = 0x04
_KINDS: Final = (ED25519, COSIGNATURE_V1)
_MAX_TIMESTAMP: Final = 2**63 - 1
#: The most signature lines a note may carry here (Go's limit; C2SP: at least 16).
MAX_SIGNATURES: Final = 100
SIGNATURE_PREFIX: Final = "\u2014 "
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


class NoteError(ValueError):
    """A note that is malformed, or that does not verify (the message says which)."""


# ---------------------------------------------------------------------------- names and keys
def check_key_name(name: str) -> str:
    """``name`` if it is a valid key name (non-empty, no Unicode space, no ``+``)."""
    if (
        not isinstance(name, str)
        or not name
        or "+" in name
        or any(c.isspace() for c in name)
        or _CONTROL.search(name)
    ):
        raise NoteError(f"invalid key name {name!r}")
    return name


def _raw_public(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(name: str, public_key: Ed25519PublicKey, kind: int = ED25519) -> int:
    """The key ID C2SP defines: ``SHA-256(name || 0x0A || kind || public key)[:4]``,
    big-endian (``kind`` 0x01 for a note signature, 0x04 for a witness cosignature)."""
    digest = hashlib.sha256(
        name.encode("utf-8") + b"\n" + bytes([kind]) + _raw_public(public_key)
    ).digest()
    return int.from_bytes(digest[:4], "big")


def cosigned_message(text: str, timestamp: int) -> bytes:
    """What a c2sp.org/tlog-cosignature v1 (Ed25519) signs: ``cosignature/v1``, ``time <T>``
    and the checkpoint's text."""
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def cosignature_time(signature: NoteSignature) -> int:
    """The POSIX time a cosignature v1 states it was made at (its first 8 bytes, big-endian);
    ``NoteError`` if it is not one (72 bytes after the key ID)."""
    if len(signature.signature) != 72:
        raise NoteError(f"not a cosignature v1: {len(signature.signature)} bytes, not 72")
    timestamp = int.from_bytes(signature.signature[:8], "big")
    if timestamp > _MAX_TIMESTAMP:
        raise NoteError("a cosignature's time exceeds 2^63 - 1")
    return timestamp


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as error:
        raise NoteError(f"invalid base64 {text!r}") from error


def _parse_key_text(text: str, what: str) -> tuple[str, int, int, bytes]:
    """``name+hex ID+base64(type || 32 bytes)`` → name, ID, type, the 32 bytes (ID not
    checked; type 0x01 or 0x04)."""
    parts = text.split("+", 2)
    if len(parts) != 3 or re.fullmatch(r"[0-9a-f]{8}", parts[1]) is None:
        raise NoteError(f"malformed {what} {text!r}")
    name = check_key_name(parts[0])
    raw = _b64decode(parts[2])
    if len(raw) != 33 or raw[0] not in _KINDS:
        raise NoteError(f"{what} {text!r} is not an Ed25519 key (type 0x01 or 0x04)")
    return name, int(parts[1], 16), raw[0], raw[1:]


def _check_kind(kind: int) -> None:
    if kind not in _KINDS:
        raise NoteError(f"signature type {kind:#04x} is not Ed25519 (0x01) or cosignature (0x04)")


@dataclass(frozen=True, slots=True)
class NoteVerifier:
    """A public key known by its name and signature type, as a note verifier knows it:
    ``kind`` :data:`ED25519` (a log's or an operator's signature of the text) or
    :data:`COSIGNATURE_V1` (a witness's timestamped cosignature of a checkpoint)."""

    name: str
    public_key: Ed25519PublicKey
    kind: int = ED25519

    def __post_init__(self) -> None:
        check_key_name(self.name)
        _check_kind(self.kind)

    @property
    def key_id(self) -> int:
        return key_id(self.name, self.public_key, self.kind)

    def vkey(self) -> str:
        """The verifier key text: ``name+<8 hex digits>+base64(type || public key)``."""
        raw = bytes([self.kind]) + _raw_public(self.public_key)
        return f"{self.name}+{self.key_id:08x}+{base64.b64encode(raw).decode('ascii')}"

    @classmethod
    def from_vkey(cls, text: str) -> NoteVerifier:
        """The verifier of a verifier key text (``NoteError`` if malformed or its ID is not
        its key's)."""
        name, claimed, kind, raw = _parse_key_text(text.strip(), "verifier key")
        verifier = cls(name, Ed25519PublicKey.from_public_bytes(raw), kind)
        if verifier.key_id != claimed:
            raise NoteError(f"verifier key {text!r}: its key ID is not its key's")
        return verifier

    def verify(self, text: str, signature: bytes) -> bool:
        """Whether ``signature`` (without the key ID) is this key's over the note ``text``."""
        message = text.encode("utf-8")
        if self.kind == COSIGNATURE_V1:
            if len(signature) != 72 or int.from_bytes(signature[:8], "big") > _MAX_TIMESTAMP:
                return False
            message = cosigned_message(text, int.from_bytes(signature[:8], "big"))
            signature = signature[8:]
        try:
            self.public_key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: the key's name and ID and the signature bytes (without the ID)."""

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        blob = self.key_id.to_bytes(4, "big") + self.signature
        return f"{SIGNATURE_PREFIX}{self.name} {base64.b64encode(blob).decode('ascii')}\n"


@dataclass(frozen=True, slots=True)
class NoteSigner:
    """A private key, the name it signs notes under, and its signature type (``kind``:
    :data:`ED25519`, or :data:`COSIGNATURE_V1` for a witness cosigning checkpoints)."""

    name: str
    private_key: Ed25519PrivateKey
    kind: int = ED25519

    def __post_init__(self) -> None:
        check_key_name(self.name)
        _check_kind(self.kind)

    @classmethod
    def from_checkpoint_signer(cls, signer: Signer, name: str) -> NoteSigner:
        """The operator's checkpoint key (the same Ed25519 key, so auditors who hold its public
        key need nothing new) signing notes as ``name``."""
        return cls(name, signer.private_key)

    @property
    def verifier(self) -> NoteVerifier:
        return NoteVerifier(self.name, self.private_key.public_key(), self.kind)

    @property
    def key_id(self) -> int:
        return key_id(self.name, self.private_key.public_key(), self.kind)

    def skey(self) -> str:
        """The signer key text of Go's ``sumdb/note``: ``PRIVATE+KEY+name+ID+base64(0x01 ||
        seed)``, the plain Ed25519 form whatever ``kind`` (Go's cosigners are made from it
        too). A secret: never logged, never served."""
        seed = self.private_key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        blob = base64.b64encode(bytes([ED25519]) + seed).decode("ascii")
        plain = key_id(self.name, self.private_key.public_key())
        return f"PRIVATE+KEY+{self.name}+{plain:08x}+{blob}"

    @classmethod
    def from_skey(cls, text: str, kind: int = ED25519) -> NoteSigner:
        """The signer of a signer key text, signing as ``kind``."""
        if not text.startswith("PRIVATE+KEY+"):
            raise NoteError("a signer key starts with PRIVATE+KEY+")
        body = text.strip()[len("PRIVATE+KEY+") :]
        name, claimed, stored, seed = _parse_key_text(body, "signer key")
        signer = cls(name, Ed25519PrivateKey.from_private_bytes(seed))
        if stored != ED25519 or signer.key_id != claimed:
            raise NoteError("signer key: its key ID is not its key's")
        return cls(name, signer.private_key, kind)

    def sign(self, text: str, timestamp: int | None = None) -> NoteSignature:
        """The signature of ``text`` (checked as a note's text). A cosignature states the time
        it is made at: ``timestamp``, POSIX seconds, given by the caller (the core reads no
        clock)."""
        _check_text(text)
        if self.kind == COSIGNATURE_V1:
            if not isinstance(timestamp, int) or not 0 <= timestamp <= _MAX_TIMESTAMP:
                raise NoteError("a cosignature needs its time: POSIX seconds, 0 to 2^63 - 1")
            signed = self.private_key.sign(cosigned_message(text, timestamp))
            return NoteSignature(self.name, self.key_id, timestamp.to_bytes(8, "big") + signed)
        return NoteSignature(self.name, self.key_id, self.private_key.sign(text.encode("utf-8")))


# ---------------------------------------------------------------------------- notes
def _check_text(text: str) -> None:
    if not isinstance(text, str) or not text.endswith("\n"):
        raise NoteError("a note's text is non-empty and ends with a newline")
    if _CONTROL.search(text):
        raise NoteError("a note holds no control characters other than newline")


@dataclass(frozen=True, slots=True)
class Note:
    """A note as written: its text and its signature lines, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def encode(self) -> str:
        return self.text + "\n" + "".join(s.line() for s in self.signatures)


def parse_note(data: str | bytes) -> Note:
    """A note's text and signature lines, nothing verified (``NoteError`` if malformed)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise NoteError("a note is UTF-8") from error
    if _CONTROL.search(data):
        raise NoteError("a note holds no control characters other than newline")
    split = data.rfind("\n\n")
    if split < 0:
        raise NoteError("a note's text is followed by a blank line and signature lines")
    text, block = data[: split + 1], data[split + 2 :]
    if not block.endswith("\n"):
        raise NoteError("a note ends with a signature line and a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"a note with more than {MAX_SIGNATURES} signatures")
    signatures = []
    for line in lines:
        if not line.startswith(SIGNATURE_PREFIX):
            raise NoteError(f"not a signature line: {line!r}")
        name, space, blob64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
        if not space:
            raise NoteError(f"not a signature line: {line!r}")
        check_key_name(name)
        blob = _b64decode(blob64)
        if len(blob) < 5:
            raise NoteError(f"a signature too short: {line!r}")
        signatures.append(NoteSignature(name, int.from_bytes(blob[:4], "big"), blob[4:]))
    return Note(text, tuple(signatures))


def sign_note(note: str | Note, *signers: NoteSigner, timestamp: int | None = None) -> str:
    """The note ``note`` (a text, or a note already signed) with a signature by each of
    ``signers`` appended; a signature it already had by one of them is replaced.
    ``timestamp`` is the time cosigners state (POSIX seconds; needed if one cosigns)."""
    if not signers:
        raise NoteError("a note needs at least one signer")
    base = note if isinstance(note, Note) else Note(note, ())
    _check_text(base.text)
    ours = {(s.name, s.key_id) for s in signers}
    kept = tuple(s for s in base.signatures if (s.name, s.key_id) not in ours)
    fresh = tuple(signer.sign(base.text, timestamp) for signer in signers)
    if len(kept) + len(fresh) > MAX_SIGNATURES:
        raise NoteError(f"a note with more than {MAX_SIGNATURES} signatures")
    return Note(base.text, kept + fresh).encode()


@dataclass(frozen=True, slots=True)
class VerifiedNote:
    """A note whose text a known key signed: the signatures that verified (one per key, in
    the note's order), the time each states if it is a cosignature (``None`` if not), and the
    signatures of keys the verifier does not know (not checked)."""

    text: str
    verified: tuple[NoteSignature, ...]
    unverified: tuple[NoteSignature, ...]
    times: tuple[int | None, ...] = ()

    @property
    def signed_by(self) -> tuple[str, ...]:
        """``name+<key ID>`` of every key whose signature verified."""
        return tuple(f"{s.name}+{s.key_id:08x}" for s in self.verified)


def open_note(data: str | bytes | Note, verifiers: Iterable[NoteVerifier]) -> VerifiedNote:
    """Verify a note against the keys the caller trusts (C2SP's rules: unknown keys ignored,
    a failing known key or no verified key is a ``NoteError``)."""
    note = data if isinstance(data, Note) else parse_note(data)
    known: dict[tuple[str, int], NoteVerifier] = {}
    ambiguous: set[tuple[str, int]] = set()
    for given in verifiers:
        key = (given.name, given.key_id)
        if key in known and known[key].vkey() != given.vkey():
            ambiguous.add(key)
        known[key] = given
    verified: list[NoteSignature] = []
    times: list[int | None] = []
    unverified: list[NoteSignature] = []
    seen: set[tuple[str, int]] = set()
    for signature in note.signatures:
        key = (signature.name, signature.key_id)
        if key in ambiguous:
            raise NoteError(f"ambiguous key {signature.name}+{signature.key_id:08x}")
        verifier = known.get(key)
        if verifier is None:
            if signature not in unverified:
                unverified.append(signature)
            continue
        if not verifier.verify(note.text, signature.signature):
            raise NoteError(f"invalid signature for key {signature.name}+{signature.key_id:08x}")
        if key not in seen:
            seen.add(key)
            verified.append(signature)
            cosigned = verifier.kind == COSIGNATURE_V1
            times.append(cosignature_time(signature) if cosigned else None)
    if not verified:
        raise NoteError("the note has no verifiable signature (no known key signed it)")
    return VerifiedNote(note.text, tuple(verified), tuple(unverified), tuple(times))


# ---------------------------------------------------------------------------- checkpoints
@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tree head as c2sp.org/tlog-checkpoint writes it."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or "\n" in self.origin or _CONTROL.search(self.origin):
            raise NoteError(f"invalid origin {self.origin!r}")
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 0:
            raise NoteError(f"invalid tree size {self.size!r}")
        if not isinstance(self.root_hash, bytes) or len(self.root_hash) != 32:
            raise NoteError("a checkpoint's root hash is 32 bytes (SHA-256)")
        for line in self.extensions:
            if not line or "\n" in line or _CONTROL.search(line):
                raise NoteError(f"invalid extension line {line!r}")

    def text(self) -> str:
        """The note text: origin, size, base64 root, extension lines, each with its newline."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root_hash).decode("ascii")]
        return "".join(f"{line}\n" for line in (*lines, *self.extensions))

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """The checkpoint of a note's text (``NoteError`` if it is not one)."""
        if not text.endswith("\n"):
            raise NoteError("a checkpoint's text ends with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3 or not all(lines):
            raise NoteError("a checkpoint's text is three or more non-empty lines")
        if _DECIMAL.fullmatch(lines[1]) is None:
            raise NoteError(f"invalid tree size {lines[1]!r}")
        root = _b64decode(lines[2])
        return cls(lines[0], int(lines[1]), root, tuple(lines[3:]))


def sign_checkpoint(
    checkpoint: Checkpoint, *signers: NoteSigner, timestamp: int | None = None
) -> str:
    """The signed note of ``checkpoint`` (C2SP: the log's key name should be its origin)."""
    return sign_note(checkpoint.text(), *signers, timestamp=timestamp)


def open_checkpoint(
    data: str | bytes | Note, verifiers: Iterable[NoteVerifier]
) -> tuple[Checkpoint, VerifiedNote]:
    """A signed checkpoint verified against trusted keys: the head, and who signed it."""
    verified = open_note(data, verifiers)
    return Checkpoint.parse(verified.text), verified
