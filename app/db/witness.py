"""The witness of ledger heads, as the units of work use it: written at the commit point,
consulted before an entry is staged, and the datasets found behind it (frozen for writes).

What is witnessed, the format and the guarantees: :mod:`odometer_core.ledger.witness` and
``docs/witness.md``. The checks against the database (at start, periodically) and the recovery
are :mod:`app.services.witness`; this module is what the write path needs, and keeps, per
process, which datasets are frozen and why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from odometer_core.ledger.checkpoints import Signer
from odometer_core.ledger.witness import Head, Witnessed, WitnessStore

log = logging.getLogger("odometer.witness")


def now() -> str:
    """The time a head is witnessed, in the ledger's form (fixed-width ISO 8601, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class WitnessUnavailable(RuntimeError):
    """The transaction committed but its heads could not be witnessed (the witness directory
    is unwritable): the request is answered 503, its datasets refuse writes until the witness
    catches up (:meth:`WitnessGuard.catch_up`)."""


@dataclass(frozen=True, slots=True)
class Behind:
    """Why a dataset refuses writes: its database head against the witness's."""

    dataset_id: str
    witnessed_seq: int
    witnessed_hash: str
    database_seq: int
    database_hash: str | None
    #: ``behind`` (the database has fewer entries), ``forked`` (another hash at the witnessed
    #: seq), ``unwitnessed`` (its last heads could not be written to the witness),
    #: ``organisation`` (another dataset of its capped organisation is behind)
    reason: str
    #: for ``organisation``: the dataset that is behind
    sibling: str | None = None


class WitnessGuard:
    """The witness store, the signer of its records and this process's frozen datasets."""

    def __init__(self, store: WitnessStore, signer: Signer | None) -> None:
        self.store = store
        self.signer = signer
        self._lock = threading.Lock()
        self._frozen: dict[str, Behind] = {}

    # ------------------------------------------------------------------ frozen datasets
    def frozen(self, dataset_id: str) -> Behind | None:
        with self._lock:
            return self._frozen.get(dataset_id)

    def freeze(self, behind: Behind) -> None:
        with self._lock:
            known = self._frozen.get(behind.dataset_id)
            self._frozen[behind.dataset_id] = behind
        if known != behind:
            log.error(
                "dataset %s frozen for writes: %s (witness seq %d, database seq %d)",
                behind.dataset_id,
                behind.reason,
                behind.witnessed_seq,
                behind.database_seq,
            )

    def thaw(self, dataset_id: str) -> None:
        with self._lock:
            gone = self._frozen.pop(dataset_id, None)
        if gone is not None:
            log.warning("dataset %s serves writes again", dataset_id)

    def replace_frozen(self, frozen: dict[str, Behind]) -> None:
        """A full check's verdict (:func:`app.services.witness.check`)."""
        with self._lock:
            before = self._frozen
            self._frozen = dict(frozen)
        for dataset_id, behind in frozen.items():
            if before.get(dataset_id) != behind:
                log.error(
                    "dataset %s frozen for writes: %s (witness seq %d, database seq %d)",
                    dataset_id,
                    behind.reason,
                    behind.witnessed_seq,
                    behind.database_seq,
                )
        for dataset_id in before.keys() - frozen.keys():
            log.warning("dataset %s serves writes again", dataset_id)

    def all_frozen(self) -> dict[str, Behind]:
        with self._lock:
            return dict(self._frozen)

    # ------------------------------------------------------------------ the write path
    def behind(self, dataset_id: str, seq: int, head_hash: str) -> Behind | None:
        """Whether the dataset, whose locked database head is ``(seq, head_hash)``, must refuse
        writes: frozen by a check, or found behind its witnessed head now (one small file
        read: a database restored under a running service is caught at its next write)."""
        known = self.frozen(dataset_id)
        if known is not None:
            return known
        record = self.store.get(dataset_id)
        if record is None or record.seq < seq:
            return None
        if record.seq == seq and record.head_hash == head_hash:
            return None
        found = Behind(
            dataset_id,
            record.seq,
            record.head_hash,
            seq,
            head_hash,
            "behind" if record.seq > seq else "forked",
        )
        self.freeze(found)
        return found

    def record(self, heads: Iterable[Head]) -> None:
        """Witness the heads a transaction just committed (one write per dataset it touched);
        :class:`WitnessUnavailable` when the store cannot be written."""
        heads = list(heads)
        try:
            forks = self.store.advance(heads, now(), self.signer)
        except OSError as exc:
            log.error("the witness could not record %d head(s): %s", len(heads), exc)
            for head in heads:
                self.freeze(
                    Behind(head.dataset_id, -1, "", head.seq, head.head_hash, "unwitnessed")
                )
            raise WitnessUnavailable(
                "the write was committed, but its ledger head could not be recorded in the "
                f"witness ({exc}); the dataset refuses writes until the witness is writable"
            ) from exc
        for record in forks:
            head = next(h for h in heads if h.dataset_id == record.dataset_id)
            self.freeze(
                Behind(
                    record.dataset_id,
                    record.seq,
                    record.head_hash,
                    head.seq,
                    head.head_hash,
                    "forked",
                )
            )

    def get(self, dataset_id: str) -> Witnessed | None:
        return self.store.get(dataset_id)
