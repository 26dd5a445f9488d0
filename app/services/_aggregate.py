"""The budget aggregate: who may see it, its filter, its ledger's next entry and head.

One path appends to a ledger (:func:`stage_entry`: the entry and its checkpoint built once,
written by :func:`app.db.writes.write`) and one rule says who may see a dataset
(:attr:`~app.services.principals.Principal.viewer`, applied in :mod:`app.db.visibility`),
whichever unit of work asks.
"""

from __future__ import annotations

from typing import Unpack

from app.db.models import Dataset
from app.db.rows import DatasetRow
from app.db.uow import UnitOfWork
from app.db.writes import CheckpointInsert, Writes, write
from app.services._types import JSONObject
from app.services.errors import LedgerBehindWitness, NotFound
from app.services.principals import Principal
from app.writepath import write_path
from app.writepath.witness import Behind
from odometer_core.accounting import ACCOUNTING_VERSION as ACCOUNTING_VERSION
from odometer_core.accounting import (
    AccountingConfig,
    FilterState,
    config_from_json,
    initial_state,
    state_from_json,
)
from odometer_core.accounting.json_types import StateJSON
from odometer_core.ledger import EntryContent, EntryKind, Signer, next_entry
from odometer_core.ledger.admission import Admission
from odometer_core.ledger.merkle import Frontier
from odometer_core.ledger.witness import Head


def visible_dataset(
    uow: UnitOfWork, principal: Principal, dataset_id: str, *, lock: bool
) -> Dataset:
    """The dataset if the principal may see it, else :class:`NotFound` (no cross-organisation
    existence leak). ``lock=True`` holds the aggregate for the rest of the transaction."""
    viewer = principal.viewer
    ds = uow.datasets.visible(dataset_id, scope=viewer.scope, analyst=viewer.analyst, lock=lock)
    if ds is None:
        raise NotFound(f"dataset '{dataset_id}' not found")
    return ds


def load_filter(ds: Dataset | DatasetRow) -> tuple[AccountingConfig, FilterState]:
    """The dataset's configuration and current state (O(1): no ledger fold). A partitioned
    dataset has no one state (its blocks' are ``block_runs``: :mod:`app.services._blocks`);
    its filter here is a block's before any charge, what its charges are computed on."""
    config = config_from_json(ds.config_json)
    if ds.partition_json is not None:
        return config, initial_state(config)
    return config, state_from_json(config, ds.state_json)


def stage_entry(
    uow: UnitOfWork,
    writes: Writes,
    ds: Dataset | DatasetRow,
    *,
    kind: EntryKind,
    actor: str,
    at: str,
    state: StateJSON,
    **content: Unpack[EntryContent],
) -> int:
    """Stage the next entry of ``ds``'s chain in ``writes``, and its signed checkpoint when the
    unit of work's signer asks for one, and move the dataset's head, state and Merkle frontier
    (:func:`extend_frontier`) with it. Returns the entry's ``seq``.

    The one way an entry joins a ledger: the write path stages into the transaction's
    ``writes`` and writes them with the levels it locked (:func:`app.db.writes.write`); the
    ORM's units of work through :func:`append_entry`. The caller holds the aggregate (locked, or
    a new dataset), so ``last_seq + 1`` is the next gapless sequence number.

    A dataset whose ledger is behind its witnessed head (:mod:`app.writepath.witness`) takes no
    entry: :class:`LedgerBehindWitness` (checked once per dataset and transaction, before its first
    entry, in memory; an operator's recovery passes). The new head is handed to the witness
    writer when the transaction commits (:meth:`UnitOfWork.commit`)."""
    witness = write_path(uow.database).witness
    if witness is not None and ds.id not in uow.heads and not uow.recovering:
        behind = witness.behind(ds.id, ds.last_seq, ds.head_hash)
        if behind is not None:
            raise behind_witness(behind)
    made = next_entry(
        dataset_id=ds.id,
        head_seq=ds.last_seq,
        head_hash=ds.head_hash,
        kind=kind,
        actor=actor,
        at=at,
        accounting_version=ACCOUNTING_VERSION,
        state=state,
        **content,
    )
    writes.ledger.append(made.to_export())
    merkle = extend_frontier(ds, made.hash)
    ds.last_seq, ds.head_hash, ds.updated_at = made.seq, made.hash, at
    ds.state_json = state
    ds.merkle_json = merkle
    uow.heads[ds.id] = Head(ds.id, made.seq, made.hash)
    signer = uow.signer
    if signer is not None and signer.due(made.seq):
        writes.checkpoints.append(checkpoint_row(signer, ds.id, made.seq, made.hash, at))
    return made.seq


def stage_admission(uow: UnitOfWork, writes: Writes, ds: DatasetRow, decided: Admission) -> None:
    """Stage what the core decided of a registration on ``ds``
    (:func:`odometer_core.ledger.admission.admit`: the entry already built and hashed on
    ``ds``'s head, its checkpoint when due) and move the dataset's head, state and Merkle
    frontier with it, as :func:`stage_entry` does, the witness consulted the same way."""
    witness = write_path(uow.database).witness
    if witness is not None and ds.id not in uow.heads and not uow.recovering:
        behind = witness.behind(ds.id, ds.last_seq, ds.head_hash)
        if behind is not None:
            raise behind_witness(behind)
    writes.ledger.append(decided.entry)
    head = decided.head
    ds.last_seq, ds.head_hash, ds.state_json = head.seq, head.head_hash, decided.state_json
    ds.updated_at, ds.merkle_json = decided.entry["at"], decided.merkle_json
    uow.heads[ds.id] = head
    if decided.checkpoint is not None:
        writes.checkpoints.append(decided.checkpoint)


def extend_frontier(ds: Dataset | DatasetRow, entry_hash: str) -> JSONObject:
    """The frontier of ``ds``'s Merkle tree (``merkle_json``) with the entry of hash
    ``entry_hash`` appended as its next leaf (RFC 9162), as stored: the core's
    :meth:`odometer_core.ledger.merkle.Frontier.append_json` (5 µs; tests/api/test_ledger_proofs.py
    holds the result to :class:`Frontier` after every write). The frontier is written with the
    head in the same statement, so it never needs a read of its own; a dataset with entries but
    no frontier, or a frontier of another size than its head, is refused (revision 0012 built
    every one)."""
    doc = ds.merkle_json
    if doc is None and ds.last_seq:
        raise RuntimeError(f"dataset '{ds.id}' has {ds.last_seq} entries but no Merkle frontier")
    if doc is not None and doc.get("size") != ds.last_seq:
        raise RuntimeError(
            f"dataset '{ds.id}': its Merkle frontier (size {doc.get('size')}) does not match "
            f"its head (seq {ds.last_seq})"
        )
    return Frontier.append_json(doc, entry_hash)


def append_entry(
    uow: UnitOfWork,
    ds: Dataset,
    *,
    kind: EntryKind,
    actor: str,
    at: str,
    state: StateJSON,
    **content: Unpack[EntryContent],
) -> int:
    """:func:`stage_entry` in an ORM unit of work, written at once (:func:`write_now`); a
    ``config`` in ``content`` becomes the dataset's (the session writes the dataset's row).
    Returns the entry's ``seq``."""
    writes = Writes()
    seq = stage_entry(uow, writes, ds, kind=kind, actor=actor, at=at, state=state, **content)
    config = content.get("config")
    if config is not None:
        ds.config_json = config
    write_now(uow, writes)
    return seq


def checkpoint_row(
    signer: Signer, dataset_id: str, seq: int, head_hash: str, at: str
) -> CheckpointInsert:
    """The checkpoint of ``(dataset, seq, head hash)`` signed at ``at``, as it is stored
    (:meth:`~odometer_core.ledger.checkpoints.Signer.checkpoint`)."""
    return signer.checkpoint(dataset_id, seq, head_hash, at)


def write_now(uow: UnitOfWork, writes: Writes) -> None:
    """Write ``writes`` in an ORM unit of work's transaction, through the write path's writer.
    The session's pending changes are flushed first: a new dataset's row must exist before its
    first entry refers to it."""
    uow.session.flush()
    write(uow.session.connection(), writes)


def behind_witness(behind: Behind) -> LedgerBehindWitness:
    """The refusal of a write to a dataset the witness froze, saying what each side holds and
    what the operator can do."""
    fields = {
        "dataset_id": behind.dataset_id,
        "reason": behind.reason,
        "witnessed_seq": behind.witnessed_seq,
        "database_seq": behind.database_seq,
    }
    fix = (
        "an operator imports the lost entries from an export (`odometer witness import "
        f"{behind.dataset_id} EXPORT`) or acknowledges the loss (`odometer witness "
        f"acknowledge {behind.dataset_id} --reason ...`); reads are still served"
    )
    if behind.reason == "unwitnessed":
        return LedgerBehindWitness(
            f"dataset '{behind.dataset_id}': its head (seq {behind.database_seq}) could not be "
            "recorded in the witness; writes resume once the witness is writable again",
            **fields,
        )
    if behind.reason == "organisation":
        return LedgerBehindWitness(
            f"dataset '{behind.dataset_id}' shares a capped organisation with dataset "
            f"'{behind.sibling}', whose ledger is behind the witness: the cap's spent budget may "
            f"have been rolled back; recover '{behind.sibling}' first ({fix})",
            sibling=behind.sibling,
            **fields,
        )
    if behind.reason == "forked":
        held = (
            f"the witness holds seq {behind.witnessed_seq} with hash "
            f"{behind.witnessed_hash[:16]}…, the database another entry there (head at seq "
            f"{behind.database_seq})"
        )
    else:
        held = (
            f"the witness holds seq {behind.witnessed_seq}, the database only "
            f"{behind.database_seq}: entries {behind.database_seq + 1}..{behind.witnessed_seq} "
            "were lost (was the database restored from a backup?)"
        )
    return LedgerBehindWitness(
        f"dataset '{behind.dataset_id}' refuses writes: its ledger is behind the witness "
        f"({held}); {fix}",
        **fields,
    )
