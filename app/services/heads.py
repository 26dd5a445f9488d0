"""Heads that others keep: every dataset's signed tree head published for witnesses to poll,
with the witness of ledger heads' cosignature, and the forks the operator acknowledged.

- :func:`published_heads`: a page of the datasets the caller may see, each with its current
  tree head signed now with the checkpoint key (a c2sp.org/tlog-checkpoint note, as
  ``…/ledger/checkpoint`` gives it) and the last head the witness of ledger heads cosigned
  (``<witness dir>/cosigned``, :mod:`odometer_core.ledger.cosign`), if it cosigns. An outside
  witness polls this, asks ``…/ledger/consistency?from=<its last size>`` and cosigns.
  :func:`head_view` makes one dataset's: ``odometer publish-heads DIR`` writes the same notes
  to a directory a static web server serves (:mod:`app.services.publish_heads`).
- :func:`forks`: a dataset's ``loss_acknowledged`` entries, each with its inclusion proof in
  the current signed head: what ``odometer verify-receipt --forks`` and ``odometer verify
  --since … --forks`` read to report a receipt or an earlier head as forked by an
  acknowledged loss rather than as a bare failure.

Who may see a dataset may read both: a head, a proof and an acknowledgement (who gave up which
entries, when, why) show no entry's content. ``docs/ledger.md``, *Published heads and
cosigners* and *Forks and acknowledged losses*.
"""

from __future__ import annotations

from typing import Any, TypedDict

from sqlalchemy import select

from app.db.models import LedgerEntry
from app.db.uow import UnitOfWork
from app.services import proofs
from app.services._aggregate import visible_dataset
from app.services.checkpoints import CheckpointsDisabled
from app.services.principals import Principal
from app.services.receipts import log_signer
from app.writepath import write_path
from odometer_core.ledger import EntryKind
from odometer_core.ledger.checkpoints import Signer
from odometer_core.ledger.merkle import EMPTY_ROOT, Frontier
from odometer_core.ledger.witness import CosignedHeads, DirectoryWitness


class CosignedView(TypedDict):
    epoch: int
    size: int
    root: str
    cosigned_at: int
    note: str


class PublishedHead(TypedDict):
    dataset_id: str
    size: int
    root: str
    note: str
    cosigned: CosignedView | None


class HeadPage(TypedDict):
    heads: list[PublishedHead]
    #: the witness of ledger heads' verifier key (``--cosigner``), ``None`` if it cosigns none
    witness_vkey: str | None
    next_offset: int | None


class ForkView(TypedDict):
    entry: dict[str, Any]
    proof: list[str]


class ForksDoc(TypedDict):
    dataset_id: str
    size: int
    root: str
    note: str
    forks: list[ForkView]


def disabled() -> CheckpointsDisabled:
    return CheckpointsDisabled(
        "checkpoint signing is not configured on this server (ODOMETER_CHECKPOINT_KEY): it "
        "publishes no signed heads"
    )


def head_view(
    signer: Signer,
    cosigned: CosignedHeads | None,
    dataset_id: str,
    size: int,
    doc: object,
) -> PublishedHead:
    """A dataset's head (its ``size`` and stored frontier ``doc``) signed now, with the last
    head the witness of ledger heads cosigned of it, if any (``cosigned``: its store)."""
    frontier = Frontier.from_json(doc) if isinstance(doc, dict) else None
    root = frontier.root() if frontier is not None else EMPTY_ROOT
    last = None if cosigned is None else cosigned.get(dataset_id)
    return {
        "dataset_id": dataset_id,
        "size": size,
        "root": root.hex(),
        "note": log_signer(signer, dataset_id).head(size, root),
        "cosigned": None
        if last is None
        else {
            "epoch": last.epoch,
            "size": last.size,
            "root": last.root.hex(),
            "cosigned_at": last.cosigned_at,
            "note": last.note,
        },
    }


def published_heads(uow: UnitOfWork, principal: Principal, *, limit: int, offset: int) -> HeadPage:
    """The signed heads of the datasets the caller may see (oldest dataset first)."""
    signer = uow.signer
    guard = write_path(uow.database).witness
    store = None if guard is None else guard.store
    cosigned = store.cosigned if isinstance(store, DirectoryWitness) else None
    with uow.read_only():
        viewer = principal.viewer
        rows = uow.datasets.list(
            scope=viewer.scope, analyst=viewer.analyst, limit=limit + 1, offset=offset
        )
        heads = [(ds.id, ds.last_seq, ds.merkle_json) for ds in rows[:limit]]
    if signer is None:
        raise disabled()
    out = [head_view(signer, cosigned, dataset_id, size, doc) for dataset_id, size, doc in heads]
    return {
        "heads": out,
        "witness_vkey": None if cosigned is None else cosigned.verifier.vkey(),
        "next_offset": offset + limit if len(rows) > limit else None,
    }


def forks(uow: UnitOfWork, principal: Principal, dataset_id: str) -> ForksDoc:
    """The dataset's acknowledged losses, each proven in its current signed head."""
    signer = uow.signer
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        if signer is None:
            raise disabled()
        size = ds.last_seq
        doc = ds.merkle_json
        rows = (
            uow.session.execute(
                select(LedgerEntry)
                .where(
                    LedgerEntry.dataset_id == ds.id,
                    LedgerEntry.kind == str(EntryKind.LOSS_ACKNOWLEDGED),
                    LedgerEntry.seq <= size,
                )
                .order_by(LedgerEntry.seq)
            )
            .scalars()
            .all()
        )
        entries = [row.to_export() for row in rows]
    frontier = Frontier.from_json(doc) if isinstance(doc, dict) else None
    root = frontier.root() if frontier is not None else EMPTY_ROOT
    out: list[ForkView] = []
    for entry in entries:
        made = proofs.inclusion_proof(uow, principal, dataset_id, int(entry["seq"]), size)
        if made.tree.root != root:  # pragma: no cover - proofs checks the frontier too
            raise RuntimeError(f"dataset '{dataset_id}': the proof's root is not the head's")
        out.append({"entry": entry, "proof": [h.hex() for h in made.path]})
    return {
        "dataset_id": dataset_id,
        "size": size,
        "root": root.hex(),
        "note": log_signer(signer, dataset_id).head(size, root),
        "forks": out,
    }
