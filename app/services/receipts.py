"""Receipts in the write path's answers, and signed tree heads on demand
(:mod:`odometer_core.ledger.receipts`; ``docs/ledger.md``, *Receipts and signed heads*).

**Receipts.** Every registration answered 201 and every settle or cancel carries the receipt of
the entry it wrote: a signed note naming the dataset's log, the entry's ``seq``, its hash and
its time, signed with the checkpoint key (:func:`receipt_of`). The body is rendered inside the
transaction and stored under the Idempotency-Key (:mod:`app.services.responses`), so a retry
gets the same receipt. It costs one Ed25519 signature per answer (about 50 µs on an idle core)
and nothing else: no read, no hashing of the tree (the receipt is a promise with a bound of
zero — the entry is committed before the answer is sent, so every tree head signed at a size
``>= seq`` includes it — not a tree head of its own). A server without a checkpoint key gives
no receipt (``null``).

**Signed tree heads.** :func:`signed_head` signs the dataset's current tree head (its size and
the root of the frontier kept beside it, ``datasets.merkle_json``: no entry read) as a
c2sp.org/tlog-checkpoint, on demand; with ``seq``, the inclusion proof of that entry in it
(:mod:`app.services.proofs`), which is what an analyst needs to check a receipt. Whoever may
see the dataset may read them (an analyst the datasets it holds a grant on): a head and a
proof show hashes, never an entry's content. They sit beside the JSON checkpoints
(:mod:`app.services.checkpoints`), which are unchanged and keep verifying.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.db.uow import UnitOfWork
from app.services import proofs
from app.services._aggregate import visible_dataset
from app.services.checkpoints import CheckpointsDisabled
from app.services.errors import InvalidQuery
from app.services.principals import Principal
from app.services.signing import Sign, signing_function
from odometer_core.ledger import Signer
from odometer_core.ledger.merkle import EMPTY_ROOT, Frontier
from odometer_core.ledger.receipts import LogSigner, origin


@lru_cache(maxsize=16)
def _sign(signer: Signer) -> Sign:
    """How the checkpoint key signs a receipt: libsodium's Ed25519 (PyNaCl)
    (:mod:`app.services.signing`: the same signature in about half the instructions)."""
    return signing_function(signer.private_key)


@lru_cache(maxsize=4096)
def log_signer(signer: Signer, dataset_id: str) -> LogSigner:
    """The checkpoint key signing ``dataset_id``'s notes (its note key ID computed once)."""
    return LogSigner(signer.private_key, dataset_id, _sign(signer))


def receipt_of(signer: Signer | None, ds: Any) -> dict[str, Any] | None:
    """The receipt of the entry at ``ds``'s head (the one the answer's transaction just
    staged: ``last_seq``, ``head_hash``, ``updated_at``), as the answer carries it."""
    if signer is None:
        return None
    return log_signer(signer, ds.id).receipt(ds.last_seq, ds.head_hash, ds.updated_at).to_json()


@dataclass(frozen=True, slots=True)
class SignedHead:
    dataset_id: str
    origin: str
    size: int
    root: str
    note: str
    key_name: str
    vkey: str
    #: with ``seq``: the entry's inclusion proof in this head (``seq``, ``entry_hash``,
    #: ``proof``: RFC 9162 ``PATH(seq - 1, D[size])``, hex)
    inclusion: dict[str, Any] | None = None


def signed_head(
    uow: UnitOfWork, principal: Principal, dataset_id: str, seq: int | None = None
) -> SignedHead:
    """The dataset's current tree head, signed; :class:`CheckpointsDisabled` (after the
    visibility check) on a server without a checkpoint key."""
    signer = uow.signer
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        if signer is None:
            raise CheckpointsDisabled(
                "checkpoint signing is not configured on this server (ODOMETER_CHECKPOINT_KEY): "
                "it signs no tree heads"
            )
        doc = ds.merkle_json
        size = ds.last_seq
    frontier = Frontier.from_json(doc) if isinstance(doc, dict) else None
    if frontier is None and size:
        raise RuntimeError(f"dataset '{dataset_id}' has {size} entries but no Merkle frontier")
    if frontier is not None and frontier.size != size:
        raise RuntimeError(f"dataset '{dataset_id}': its frontier is not at its head")
    root = frontier.root() if frontier is not None else EMPTY_ROOT
    inclusion = None
    if seq is not None:
        if seq > size:
            raise InvalidQuery(
                f"entry {seq} is past the head (seq {size}): no signed head includes it yet",
                field="seq",
            )
        made = proofs.inclusion_proof(uow, principal, dataset_id, seq, size)
        if made.tree.root != root:  # pragma: no cover - proofs checks the frontier too
            raise RuntimeError(f"dataset '{dataset_id}': the proof's root is not the head's")
        inclusion = {
            "seq": seq,
            "entry_hash": made.entry_hash,
            "proof": [h.hex() for h in made.path],
        }
    ls = log_signer(signer, dataset_id)
    return SignedHead(
        dataset_id=dataset_id,
        origin=origin(dataset_id),
        size=size,
        root=root.hex(),
        note=ls.head(size, root),
        key_name=ls.signer.name,
        vkey=ls.signer.verifier.vkey(),
        inclusion=inclusion,
    )
