"""Reading a dataset's ledger: filtered pages, streamed in batches, exports closed by their
signed head, and full-chain replay."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TypedDict

from sqlalchemy.exc import InterfaceError, OperationalError

from app.db.repositories import LedgerFilter
from app.db.uow import UnitOfWork
from app.services._aggregate import checkpoint_row, visible_dataset
from app.services._common import utc_now
from app.services._types import JSONObject
from app.services.errors import InvalidQuery
from app.services.principals import ADMIN_PRINCIPAL_ID, Principal
from odometer_core.ledger.checkpoints import ALGORITHM, Signer
from odometer_core.ledger.replay import ReplayVerdict, replay

#: Entries fetched per short read transaction while streaming.
BATCH_SIZE = 500

log = logging.getLogger("odometer")


@dataclass(frozen=True, slots=True)
class LedgerQuery:
    after_seq: int = 0
    limit: int = 100
    where: LedgerFilter = field(default_factory=LedgerFilter)


class ClosingHead(TypedDict):
    """The head that closes an export: a signed checkpoint's fields and its algorithm (the
    signature's fields null on a service that signs no heads)."""

    dataset_id: str
    seq: int
    head_hash: str
    signed_at: str | None
    key_id: str | None
    algorithm: str | None
    signature: str | None


class LedgerPage:
    """An iterator over the entries of one page; ``next_after_seq`` is known once exhausted
    (the cursor to pass as ``after_seq`` for the next page, ``None`` at the end)."""

    def __init__(
        self,
        dataset_id: str,
        head_seq: int,
        entries: Iterator[JSONObject],
        *,
        head_hash: str = "",
        signer: Signer | None = None,
    ) -> None:
        self.dataset_id = dataset_id
        self.head_seq = head_seq
        self.head_hash = head_hash
        self._signer = signer
        self._entries = entries
        self.next_after_seq: int | None = None

    def __iter__(self) -> Iterator[JSONObject]:  # entries as exported
        return self._entries

    def closing_head(self) -> ClosingHead:
        """What closes an export of this page (``odometer_core.ledger.formats``): the head
        read when the page was opened, signed now by the checkpoint key (the statement of a
        checkpoint, ``odometer_core.ledger.checkpoints``), or unsigned (``key_id``,
        ``algorithm`` and ``signature`` null) on a service that signs no heads. An auditor
        holding the operator's public key sees from it that no entry was cut off the end."""
        if self._signer is None:
            return {
                "dataset_id": self.dataset_id,
                "seq": self.head_seq,
                "head_hash": self.head_hash,
                "signed_at": None,
                "key_id": None,
                "algorithm": None,
                "signature": None,
            }
        row = checkpoint_row(
            self._signer, self.dataset_id, self.head_seq, self.head_hash, utc_now()
        )
        return {**row, "algorithm": ALGORITHM}


def read_ledger(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    query: LedgerQuery,
    *,
    fallback: Callable[[], UnitOfWork | None] | None = None,
) -> LedgerPage:
    """Check access now, then stream the page in batches, each in its own short read
    transaction (the ledger is append-only, so batches below the head are stable).

    ``fallback`` gives the unit of work a page read on a read replica continues on (the
    primary's; ``None`` when ``uow`` is already the primary's): a replica lost mid-stream
    (its server killed, its connection cut) costs the page one batch read again on the
    primary, from the last entry sent, up to the same head. Every entry up to that head is on
    the primary as the replica had it (the primary is never behind its replica, and entries
    are never rewritten), so the page is byte for byte the one the primary would have sent."""
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        head, head_hash = ds.last_seq, ds.head_hash
        if query.where.actor is not None:
            actor = _actor(uow, ds.organisation, query.where.actor)
            query = replace(query, where=replace(query.where, actor=actor))

    def batch(source: UnitOfWork, after: int, size: int) -> list[JSONObject]:
        with source.read_only():
            rows = source.ledger.page(
                dataset_id, after_seq=after, limit=size, up_to_seq=head, where=query.where
            )
            return [r.to_export() for r in rows]

    def entries() -> Iterator[JSONObject]:
        after, left = query.after_seq, query.limit
        source, moved = uow, False
        while left > 0:
            try:
                rows = batch(source, after, min(BATCH_SIZE, left))
            except (OperationalError, InterfaceError) as exc:
                primary = None if moved or fallback is None else fallback()
                if primary is None:
                    raise
                log.warning(
                    "the read replica failed mid-stream on %s after seq %d; the primary "
                    "serves the rest up to seq %d: %s",
                    dataset_id,
                    after,
                    head,
                    exc,
                )
                source, moved = primary, True
                continue
            if not rows:
                return
            yield from rows
            after = rows[-1]["seq"]
            left -= len(rows)
            if left == 0 and after < head:
                page.next_after_seq = after

    page = LedgerPage(dataset_id, head, entries(), head_hash=head_hash, signer=uow.signer)
    return page


def _actor(uow: UnitOfWork, organisation: str, actor: str) -> str:
    """The principal id an ``actor`` filter means: an id as the ledger records it (the admin's
    included), or the name of exactly one principal of the dataset's organisation; anything
    else is a 422 that says what the filter takes, not an empty answer."""
    if actor == ADMIN_PRINCIPAL_ID or uow.principals.get(actor) is not None:
        return actor
    named = [p.id for p in uow.principals.list(organisation) if p.name == actor]
    if len(named) == 1:
        return named[0]
    if named:
        raise InvalidQuery(
            f"several principals are named '{actor}': filter by id ({', '.join(named)})",
            field="actor",
        )
    raise InvalidQuery(
        f"no principal '{actor}' in this dataset's organisation: 'actor' is a principal's id "
        "(as the ledger records it) or name",
        field="actor",
    )


def verify_ledger(uow: UnitOfWork, principal: Principal, dataset_id: str) -> ReplayVerdict:
    """Replay the dataset's whole ledger and compare with the stored head and state."""
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        head, state = ds.last_seq, ds.state_json
        head_hash = ds.head_hash
        rows = [
            r.to_export() for r in uow.ledger.page(ds.id, after_seq=0, limit=head, up_to_seq=head)
        ]
    verdict = replay(rows)
    problems = list(verdict.problems)
    if verdict.head_hash != head_hash:
        problems.append("the dataset's head hash differs from the last entry's hash")
    if verdict.state != state:
        problems.append("the dataset's stored state differs from the replayed state")
    return replace(verdict, ok=not problems, problems=problems)
