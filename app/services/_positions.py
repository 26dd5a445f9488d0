"""The report's verified positions kept in the database, so that a restart does not re-run a
whole ledger (:mod:`app.services._verified` keeps them in memory; this module across starts).

After a clean report whose re-run cost at least :data:`PERSIST_AFTER` seconds of CPU since the
position last stored, the replayer at the head is written to ``verified_positions``
(:class:`app.db.models.VerifiedPosition`): its lossless JSON
(:func:`odometer_core.ledger.resume.replayer_to_json`), compressed, with a MAC. The first
report after a start reads it back and resumes from it exactly as from a remembered position:
only if the hash chain it re-walks from the genesis reaches the stored head with the same hash
(:class:`app.services._verified.Verification`), otherwise it re-runs everything.

**What the MAC is for.** The chain check proves the ledger's first *n* entries are the ones
the position was computed from; it cannot prove that the stored replayer *is* what replaying
them gives. Anyone able to write the database could otherwise store a replayer whose state
hides an overspend, and the report would resume from it. So a position is authenticated with
HMAC-SHA256 (RFC 2104) under a key derived from the checkpoint key
(SHA-256 of a label and the private key's raw bytes: a key that never leaves the server and
that the database does not hold), over the dataset, the entry count, the head hash, the code
that wrote it and the SHA-256 of the body. A position from another dataset, another key,
another build of the core (:func:`code_identity`: any change to the core's source discards
every stored position, so a replay rule fixed in an upgrade is applied to the whole ledger
again), or a tampered body is ignored and the report re-runs the ledger. Without a checkpoint
key nothing is stored (``make run`` makes one). ``docs/operations.md`` (*Reports*) states it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import zlib
from functools import lru_cache
from importlib import resources
from typing import Final

from sqlalchemy.exc import SQLAlchemyError

from app.db.models import VerifiedPosition
from app.db.uow import UnitOfWork
from app.services._common import utc_now
from odometer_core.ledger import Signer
from odometer_core.ledger.replay import Replayer
from odometer_core.ledger.resume import FORMAT, PositionError, replayer_from_json, replayer_to_json

log = logging.getLogger("odometer")

#: A position is stored once the re-runs it would save reach this much CPU (seconds) …
PERSIST_AFTER = 0.05
#: … and at least what writing it costs, about this much CPU per run or reservation it holds
#: (2 µs: writing the attack's 109,072 runs took about 0.1 s of JSON and compression in
#: ``benchmarks/RESULTS.md``'s run), so that storing never costs more than the re-runs it saves.
STORE_COST_PER_HELD = 2e-6


def due(unsaved: float, held: int) -> bool:
    """Whether a position holding ``held`` runs and reservations, with ``unsaved`` seconds of
    re-runs since the stored one, is stored now."""
    return unsaved >= max(PERSIST_AFTER, held * STORE_COST_PER_HELD)


_LABEL: Final = b"odometer verified positions/1"


@lru_cache(maxsize=1)
def code_identity() -> str:
    """The SHA-256 of the accounting core's source (every module, by path): a stored position
    is resumed only by the build of the core that wrote it."""
    digest = hashlib.sha256(FORMAT.encode())
    root = resources.files("odometer_core")
    stack = [root]
    files = []
    while stack:
        node = stack.pop()
        for child in node.iterdir():
            if child.is_dir():
                if child.name != "__pycache__":
                    stack.append(child)
            elif child.name.endswith(".py"):
                files.append(child)
    for path in sorted(files, key=str):
        digest.update(str(path).removeprefix(str(root)).encode() + b"\x00")
        digest.update(path.read_bytes() + b"\x00")
    return digest.hexdigest()


def _mac(
    signer: Signer, dataset_id: str, entries: int, head_hash: str, code: str, body: bytes
) -> str:
    message = "\n".join(
        [dataset_id, str(entries), head_hash, code, hashlib.sha256(body).hexdigest()]
    )
    return hmac.new(signer.derived_key(_LABEL), message.encode(), hashlib.sha256).hexdigest()


def stored(uow: UnitOfWork, dataset_id: str) -> Replayer | None:
    """The replayer at ``dataset_id``'s stored position, or ``None`` when there is none this
    server can trust (no key, another key or build, a MAC that does not match, a body that
    does not read back)."""
    signer = uow.signer
    if signer is None:
        return None
    with uow.read_only():
        row = uow.session.get(VerifiedPosition, dataset_id)
        if row is None:
            return None
        entries, head_hash, code, key_id = row.entries, row.head_hash, row.code, row.key_id
        mac, body = row.mac, bytes(row.body)
    if key_id != signer.key_id or code != code_identity():
        return None
    expected = _mac(signer, dataset_id, entries, head_hash, code, body)
    if not hmac.compare_digest(mac, expected):
        log.warning("the stored verified position of dataset %s does not authenticate", dataset_id)
        return None
    try:
        replayer = replayer_from_json(json.loads(zlib.decompress(body)))
    except (PositionError, ValueError, zlib.error):
        log.warning("the stored verified position of dataset %s cannot be read", dataset_id)
        return None
    if replayer.entries != entries or replayer.head_hash != head_hash:
        return None
    return replayer


def store(uow: UnitOfWork, dataset_id: str, replayer: Replayer) -> bool:
    """Store ``replayer`` (a clean replay's, not fed again) as ``dataset_id``'s position,
    unless a position at least as far is stored already; ``False`` when nothing was written
    (no key, or the write failed: a position only saves work, so a failure is logged, not
    raised)."""
    signer = uow.signer
    if signer is None:
        return False
    try:
        obj = replayer_to_json(replayer)
    except PositionError:
        return False
    body = zlib.compress(json.dumps(obj, separators=(",", ":")).encode(), 1)
    code = code_identity()
    mac = _mac(signer, dataset_id, replayer.entries, replayer.head_hash, code, body)
    try:
        with uow:
            row = uow.session.get(VerifiedPosition, dataset_id)
            if row is not None and row.entries >= replayer.entries and row.code == code:
                return False
            if row is None:
                row = VerifiedPosition(dataset_id=dataset_id)
                uow.session.add(row)
            row.entries, row.head_hash, row.code = replayer.entries, replayer.head_hash, code
            row.key_id, row.mac, row.body = signer.key_id, mac, body
            row.written_at = utc_now()
            uow.commit()
    except SQLAlchemyError as exc:
        log.warning("the verified position of dataset %s was not stored: %s", dataset_id, exc)
        return False
    return True
