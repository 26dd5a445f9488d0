"""The witness of ledger heads: the database compared with it, and an operator's recovery.

Every committed head is witnessed outside the database at the commit point
(:meth:`app.db.uow.UnitOfWork.commit`), and every write first compares its dataset's head with
the witness (:func:`app.services._aggregate.stage_entry`). Here:

- :func:`check` compares every dataset's database head with the witness (at start and every
  ``ODOMETER_WITNESS_CHECK_SECONDS``): a dataset behind it (fewer entries, or another hash at the
  witnessed seq) is frozen for writes (409 ``LedgerBehindWitness``), and so is every other
  dataset of its organisation when the organisation has a cap (the cap's counted state went
  back with it); a dataset ahead of the witness (a head not yet witnessed, or a witness that
  was lost) has its head witnessed now;
- :func:`import_tail` brings a frozen dataset back from an export taken before the loss;
- :func:`cosign_heads` (after each check), with the witness's own key: the operator's signed
  tree head of every dataset that moved is cosigned if it extends the last one cosigned;
- :func:`acknowledge_loss` records in the ledger that the lost entries are given up (naming
  the last head the witness cosigned before the loss: the fork, explicit);
- :func:`witness_status` is the operator's view.

Format, settings and guarantees: ``docs/witness.md``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

from anyio import to_thread
from sqlalchemy import select, tuple_

from app.db.models import Dataset, Invocation, LedgerEntry, Organisation
from app.db.uow import Database, UnitOfWork
from app.db.writes import Writes
from app.services import proofs
from app.services._aggregate import append_entry, extend_frontier, write_now
from app.services._common import utc_now
from app.services.errors import ConcurrentUpdate, NotFound, ServiceError
from app.services.principals import Principal, Role
from app.services.receipts import log_signer
from app.settings import Settings
from app.writepath import write_path
from app.writepath.witness import Behind, WitnessGuard
from odometer_core.accounting.json_types import ExportedEntry
from odometer_core.ledger import EntryKind, replay
from odometer_core.ledger.checkpoints import Signer
from odometer_core.ledger.cosign import CosignedHeads, CosignRefused, cosigner_key
from odometer_core.ledger.merkle import EMPTY_ROOT, Frontier
from odometer_core.ledger.witness import DirectoryWitness, Head, Witnessed

log = logging.getLogger("odometer.witness")

#: Entries an import re-creates the rows of. A tail with other kinds (grants, blocks, budget
#: changes) or with organisation or quota parts is refused: acknowledge its loss instead.
_IMPORTABLE = frozenset(
    {
        EntryKind.INVOCATION_ACCEPTED,
        EntryKind.INVOCATION_RESERVED,
        EntryKind.INVOCATION_REJECTED,
        EntryKind.INVOCATION_SETTLED,
        EntryKind.INVOCATION_CANCELLED,
    }
)


class WitnessDisabled(ServiceError):
    """A witness operation on a server without a witness (``ODOMETER_WITNESS_DIR`` unset)."""

    code = "WitnessDisabled"


class NotBehind(ServiceError):
    """Recovery asked for a dataset that is not behind its witness (nothing to recover)."""

    code = "NotBehindWitness"


class TailRefused(ServiceError):
    """An imported tail that does not bring the dataset exactly to its witnessed head."""

    code = "TailRefused"


def witness_from_settings(settings: Settings, signer: Signer | None) -> WitnessGuard | None:
    """The configured witness (its records signed with the checkpoint key, if one is set; the
    heads it sees cosigned with its own key, ``ODOMETER_WITNESS_KEY``, if one is set), or
    ``None`` when ``ODOMETER_WITNESS_DIR`` is unset."""
    path = (settings.witness_dir or "").strip()
    if not path:
        return None
    key = (settings.witness_key or "").strip()
    cosigner = cosigner_key(Path(key).read_text("utf-8")) if key else None
    store = DirectoryWitness(path, cosigner=cosigner)
    return WitnessGuard(store, signer, lag=settings.witness_lag_seconds)


def _cosigned(guard: WitnessGuard | None) -> CosignedHeads | None:
    store = None if guard is None else guard.store
    return store.cosigned if isinstance(store, DirectoryWitness) else None


# ---------------------------------------------------------------------------- the check
def check(database: Database, *, cosign: bool = True) -> dict[str, Behind]:
    """Compare every dataset's head with the witness; freeze what is behind, witness what is
    ahead; then (``cosign``, with a witness key) cosign the heads that moved; the frozen
    datasets. The witness is read before the database: a head witnessed
    meanwhile is one the database already has, so a concurrent write is never taken for a
    loss."""
    guard = write_path(database).witness
    if guard is None:
        return {}
    records = {r.dataset_id: r for r in guard.store.records()}
    uow = UnitOfWork(database)
    frozen: dict[str, Behind] = {}
    ahead: list[Head] = []
    with uow.read_only():
        session = uow.session
        rows = session.execute(
            select(Dataset.id, Dataset.organisation, Dataset.last_seq, Dataset.head_hash)
        ).all()
        heads = {r.id: r for r in rows}
        probes = [
            (d, rec.seq) for d, rec in records.items() if d in heads and heads[d].last_seq > rec.seq
        ]
        at_witnessed: dict[str, str] = {}
        for start in range(0, len(probes), 500):
            part = probes[start : start + 500]
            for dataset_id, _seq, digest in session.execute(
                select(LedgerEntry.dataset_id, LedgerEntry.seq, LedgerEntry.hash).where(
                    tuple_(LedgerEntry.dataset_id, LedgerEntry.seq).in_(part)
                )
            ):
                at_witnessed[dataset_id] = digest
        capped = {
            o.id
            for o in session.execute(select(Organisation)).scalars()
            if o.cap_json is not None or o.cap_seq
        }
    for dataset_id, row in heads.items():
        record = records.get(dataset_id)
        head = Head(dataset_id, row.last_seq, row.head_hash)
        if record is None:
            ahead.append(head)
            continue
        reason = _compare(record, row.last_seq, row.head_hash, at_witnessed.get(dataset_id))
        if reason is None:
            if row.last_seq > record.seq:
                ahead.append(head)
            continue
        frozen[dataset_id] = Behind(
            dataset_id, record.seq, record.head_hash, row.last_seq, row.head_hash, reason
        )
    for behind in list(frozen.values()):
        org = heads[behind.dataset_id].organisation
        if org not in capped:
            continue
        for dataset_id, row in heads.items():
            if row.organisation == org and dataset_id not in frozen:
                frozen[dataset_id] = Behind(
                    dataset_id,
                    behind.witnessed_seq,
                    behind.witnessed_hash,
                    row.last_seq,
                    row.head_hash,
                    "organisation",
                    sibling=behind.dataset_id,
                )
    missing = sorted(set(records) - set(heads))
    if missing:
        log.error(
            "the witness holds %d dataset(s) the database does not have (lost with a restore?): %s",
            len(missing),
            ", ".join(missing[:20]),
        )
    if ahead:
        if not records and heads:
            log.warning(
                "the witness is empty: witnessing the database's %d dataset head(s) as they are "
                "(a restore done before now cannot be detected)",
                len(ahead),
            )
        try:
            guard.store.advance(ahead, utc_now(), guard.signer)
        except OSError as exc:
            log.error("the witness could not record %d head(s): %s", len(ahead), exc)
            for head in ahead:
                frozen.setdefault(
                    head.dataset_id,
                    Behind(head.dataset_id, -1, "", head.seq, head.head_hash, "unwitnessed"),
                )
    guard.replace_frozen(frozen)
    if cosign:
        _cosign_logged(database, guard, frozen)
    return frozen


def _cosign_logged(database: Database, guard: WitnessGuard, frozen: Mapping[str, Behind]) -> None:
    """:func:`cosign_heads`, a failure logged: cosigning never stops the check."""
    try:
        cosign_heads(database, guard, frozen)
    except Exception:  # logged; the next check cosigns what is left
        log.exception("the witness could not cosign the heads")


#: whom the witness reads proofs as (it reads every dataset's tree, never an entry's content)
_WITNESS = Principal("witness", Role.ADMIN, None)


def cosign_heads(database: Database, guard: WitnessGuard, frozen: Mapping[str, Behind]) -> int:
    """The witness cosigns the operator's signed tree head of every dataset that moved since
    the head it last cosigned (none of a frozen one): the head is signed with the checkpoint
    key, then cosigned only if a consistency proof shows it extends the last one cosigned in
    the same witness epoch (:meth:`CosignedHeads.cosign`); how many it cosigned. A head it
    refuses is logged at ERROR (a fork nobody acknowledged) and left uncosigned."""
    cosigned = _cosigned(guard)
    signer = database.signer
    if cosigned is None or signer is None:
        return 0
    epochs = {r.dataset_id: r.epoch for r in guard.store.records()}
    uow = UnitOfWork(database)
    with uow.read_only():
        rows = uow.session.execute(select(Dataset.id, Dataset.last_seq, Dataset.merkle_json)).all()
    done = 0
    for dataset_id, size, doc in rows:
        epoch = epochs.get(dataset_id, 0)
        last = cosigned.get(dataset_id)
        if dataset_id in frozen or (last is not None and (last.epoch, last.size) >= (epoch, size)):
            continue
        frontier = Frontier.from_json(doc) if isinstance(doc, dict) else None
        if (frontier.size if frontier is not None else 0) != size:
            continue  # a head mid-write: the next round
        root = frontier.root() if frontier is not None else EMPTY_ROOT
        proof: list[bytes] = []
        if last is not None and last.epoch == epoch and last.size:
            made = proofs.consistency_proof(
                UnitOfWork(database), _WITNESS, dataset_id, last.size, size
            )
            proof = made.path
        operator = log_signer(signer, dataset_id)
        try:
            cosigned.cosign(
                operator.head(size, root),
                operator.signer.verifier,
                epoch=epoch,
                proof=proof,
                timestamp=int(time.time()),
            )
        except CosignRefused as exc:
            log.error("the witness did not cosign dataset %s's head: %s", dataset_id, exc)
            continue
        done += 1
    return done


def _compare(record: Witnessed, seq: int, head_hash: str, hash_at: str | None) -> str | None:
    """Why a database head ``(seq, head_hash)`` is behind ``record`` (``hash_at``: the
    database's hash at the witnessed seq, when it is ahead), or ``None``."""
    if seq < record.seq:
        return "behind"
    if seq == record.seq:
        return None if head_hash == record.head_hash else "forked"
    return None if hash_at == record.head_hash else "forked"


# ---------------------------------------------------------------------------- status
class BehindView(TypedDict):
    """A dataset this process refuses writes to, and why
    (:class:`~app.writepath.witness.Behind`)."""

    dataset_id: str
    reason: str
    witnessed_seq: int
    witnessed_hash: str | None
    database_seq: int
    sibling: str | None


class WitnessStatus(TypedDict):
    """What the operator sees of the witness (``WitnessOut``)."""

    enabled: bool
    location: str | None
    signed: bool
    frozen: list[BehindView]


def witness_status(database: Database) -> WitnessStatus:
    """What the operator sees: whether heads are witnessed, where, and the frozen datasets."""
    guard = write_path(database).witness
    if guard is None:
        return {"enabled": False, "location": None, "signed": False, "frozen": []}
    store = guard.store
    return {
        "enabled": True,
        "location": str(getattr(store, "path", type(store).__name__)),
        "signed": guard.signer is not None,
        "frozen": [_behind_json(b) for b in sorted(guard.all_frozen().values(), key=_key)],
    }


def _key(behind: Behind) -> str:
    return behind.dataset_id


def _behind_json(behind: Behind) -> BehindView:
    return {
        "dataset_id": behind.dataset_id,
        "reason": behind.reason,
        "witnessed_seq": behind.witnessed_seq,
        "witnessed_hash": behind.witnessed_hash or None,
        "database_seq": behind.database_seq,
        "sibling": behind.sibling,
    }


# ---------------------------------------------------------------------------- recovery
def _guard(uow: UnitOfWork) -> WitnessGuard:
    guard = write_path(uow.database).witness
    if guard is None:
        raise WitnessDisabled("this server keeps no witness (ODOMETER_WITNESS_DIR is unset)")
    return guard


def _locked_behind(
    uow: UnitOfWork, guard: WitnessGuard, dataset_id: str
) -> tuple[Dataset, Witnessed]:
    ds = uow.datasets.get_for_update(dataset_id)
    if ds is None:
        raise NotFound(f"dataset '{dataset_id}' not found")
    record = guard.get(dataset_id)
    if record is None or (record.seq == ds.last_seq and record.head_hash == ds.head_hash):
        raise NotBehind(
            f"dataset '{dataset_id}' is not behind its witness (database seq {ds.last_seq}"
            + ("" if record is None else f", witnessed seq {record.seq}")
            + "): nothing to recover",
        )
    if record.seq < ds.last_seq:
        hash_at = uow.ledger.page(
            dataset_id, after_seq=record.seq - 1, limit=1, up_to_seq=record.seq
        )
        if hash_at and hash_at[0].hash == record.head_hash:
            raise NotBehind(f"dataset '{dataset_id}' is ahead of its witness: nothing to recover")
    return ds, record


def import_tail(
    uow: UnitOfWork, principal: Principal, dataset_id: str, entries: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Append the lost entries of a frozen dataset from an export (the whole ledger or any part
    that holds the lost tail): they must follow the database's head and end exactly at the
    witnessed head, and the whole ledger must replay. Refused (nothing changes) otherwise."""
    guard = _guard(uow)
    uow.recovering = True
    with uow:
        ds, record = _locked_behind(uow, guard, dataset_id)
        if ds.partition_json is not None:
            raise TailRefused(
                "a partitioned dataset's tail cannot be imported (its blocks are not in the "
                "ledger entries alone): acknowledge the loss instead"
            )
        tail = [
            dict(e) for e in entries if isinstance(e.get("seq"), int) and e["seq"] > ds.last_seq
        ]
        _check_tail(ds, record, tail)
        stored = [e.to_export() for e in _whole_ledger(uow, ds.id, ds.last_seq)]
        verdict = replay([*stored, *tail])
        if not verdict.ok or verdict.head_hash != record.head_hash:
            problem = verdict.problems[0] if verdict.problems else "another head"
            raise TailRefused(f"the database's ledger with this tail does not replay: {problem}")
        # entries of the export's form, as the replay above has just verified them
        writes = Writes(ledger=cast(list[ExportedEntry], tail))
        _invocation_rows(uow, ds.id, tail)
        for entry in tail:  # the Merkle frontier moves with the head, as stage_entry moves it
            ds.merkle_json = extend_frontier(ds, entry["hash"])
            ds.last_seq = entry["seq"]
        last = tail[-1]
        ds.last_seq, ds.head_hash, ds.state_json = last["seq"], last["hash"], last["state"]
        ds.updated_at = last["at"]
        uow.heads[ds.id] = Head(ds.id, ds.last_seq, ds.head_hash)
        write_now(uow, writes)
        uow.commit()
    guard.thaw(dataset_id)
    log.warning(
        "dataset %s: %d lost entries imported by %s (now at seq %d)",
        dataset_id,
        len(tail),
        principal.id,
        record.seq,
    )
    return {
        "dataset_id": dataset_id,
        "imported": len(tail),
        "seq": record.seq,
        "head_hash": record.head_hash,
        "replay": verdict.to_json(),
    }


def _check_tail(ds: Dataset, record: Witnessed, tail: Sequence[Mapping[str, Any]]) -> None:
    if not tail:
        raise TailRefused(
            f"the export holds no entry after the database's head (seq {ds.last_seq})"
        )
    first, last = tail[0], tail[-1]
    if any(e.get("dataset_id") != ds.id for e in tail):
        raise TailRefused(f"the export's entries are not all of dataset '{ds.id}'")
    if first["seq"] != ds.last_seq + 1 or first.get("prev_hash") != ds.head_hash:
        raise TailRefused(
            f"the export's entry {first['seq']} does not follow the database's head (seq "
            f"{ds.last_seq}, hash {ds.head_hash[:16]}…)"
        )
    if last["seq"] != record.seq or last.get("hash") != record.head_hash:
        raise TailRefused(
            f"the export ends at seq {last['seq']} (hash {str(last.get('hash'))[:16]}…), not at "
            f"the witnessed head (seq {record.seq}, hash {record.head_hash[:16]}…)"
        )
    for entry in tail:
        if entry.get("kind") not in _IMPORTABLE or entry.get("org") or entry.get("quota"):
            raise TailRefused(
                f"entry {entry['seq']} ({entry.get('kind')}) cannot be imported (only "
                "invocations without organisation or quota parts are): acknowledge the loss "
                "instead"
            )


def _whole_ledger(uow: UnitOfWork, dataset_id: str, head: int) -> list[LedgerEntry]:
    out: list[LedgerEntry] = []
    while len(out) < head:
        page = uow.ledger.page(dataset_id, after_seq=len(out), limit=10_000, up_to_seq=head)
        if not page:
            break
        out.extend(page)
    return out


def _invocation_rows(uow: UnitOfWork, dataset_id: str, tail: Sequence[Mapping[str, Any]]) -> None:
    """The ``invocations`` rows the lost entries had made or moved."""
    session = uow.session
    made: dict[str, Invocation] = {}
    for entry in tail:
        inv_id, kind = str(entry["invocation_id"]), entry["kind"]
        request = entry.get("request") or {}
        if kind in (EntryKind.INVOCATION_SETTLED, EntryKind.INVOCATION_CANCELLED):
            inv = made.get(inv_id) or session.get(Invocation, inv_id)
            if inv is None:
                raise TailRefused(f"entry {entry['seq']} finishes an unknown invocation")
            inv.status = str(kind).removeprefix("invocation_")
            inv.cell = request.get("cell")
            inv.charge, inv.refund = entry.get("charge") or {}, entry.get("refund")
            inv.updated_at = entry["at"]
            continue
        declaration = entry["declaration"]
        inv = Invocation(
            id=inv_id,
            dataset_id=dataset_id,
            status=str(kind).removeprefix("invocation_"),
            kind=declaration["type"],
            sub_budget=request.get("sub_budget"),
            declaration=declaration,
            request=request,
            charge=entry.get("charge") or {},
            requested=entry.get("requested") or {},
            refund=None,
            reservation=entry.get("reservation"),
            cell=None,
            reason=entry.get("reason"),
            actor=entry["actor"],
            created_at=entry["at"],
            updated_at=entry["at"],
            levels={"organisation": None, "quota": None},
        )
        session.add(inv)
        made[inv_id] = inv


def acknowledge_loss(
    uow: UnitOfWork, principal: Principal, dataset_id: str, reason: str
) -> dict[str, Any]:
    """Give up the lost entries of a frozen dataset: a ``loss_acknowledged`` entry follows the
    database's head (the state does not move), and the witness moves to it (its next epoch)."""
    guard = _guard(uow)
    uow.recovering = True
    at = utc_now()
    with uow:
        ds, record = _locked_behind(uow, guard, dataset_id)
        lost_from = ds.last_seq
        request: dict[str, Any] = {
            "witnessed_seq": record.seq,
            "witnessed_hash": record.head_hash,
            "database_seq": lost_from,
        }
        cosigned = _cosigned(guard)
        last = None if cosigned is None else cosigned.get(dataset_id)
        if last is not None:  # the last head the witness cosigned before the loss: the fork
            request["signed_head"] = {"size": last.size, "root": last.root.hex()}
        seq = append_entry(
            uow,
            ds,
            kind=EntryKind.LOSS_ACKNOWLEDGED,
            actor=principal.id,
            at=at,
            state=ds.state_json,
            request=request,
            reason=reason,
        )
        head = Head(ds.id, seq, ds.head_hash)
        uow.heads.pop(ds.id, None)  # the witness moves back on purpose, below
        uow.commit()
    guard.forget(dataset_id)  # nothing pending of the lost head is written after this
    try:
        moved = guard.store.supersede(head, at, guard.signer, expected=record)
    except ValueError as exc:
        raise ConcurrentUpdate(f"{exc}; retry") from None
    guard.thaw(dataset_id)
    log.warning(
        "dataset %s: loss of entries %d..%d acknowledged by %s (%s)",
        dataset_id,
        lost_from + 1,
        record.seq,
        principal.id,
        reason,
    )
    return {
        "dataset_id": dataset_id,
        "seq": seq,
        "head_hash": head.head_hash,
        "lost": request,
        "witness": moved.to_json(),
    }


async def witness_loop(database: Database, every: float) -> asyncio.Task[None] | None:
    """:func:`check` now (before the first request is served; the heads are cosigned after
    it, in the background, not to hold up the start), then every ``every`` seconds in a
    thread (0: at start only); the background task, or ``None`` without a witness."""
    guard = write_path(database).witness
    if guard is None:
        return None
    await to_thread.run_sync(lambda: check(database, cosign=False))
    if every <= 0 and _cosigned(guard) is None:
        return None

    async def periodically() -> None:
        if _cosigned(guard) is not None:
            frozen = guard.all_frozen()
            await to_thread.run_sync(_cosign_logged, database, guard, frozen)
        while every > 0:
            await asyncio.sleep(every)
            try:
                await to_thread.run_sync(check, database)
            except Exception:  # a failed check is logged; the next one runs on time
                log.exception("the witness check failed")

    return asyncio.get_running_loop().create_task(periodically())
