"""The lock policy of the write path: which rows a transaction locks, in which mode and order.

Every write on a dataset locks its levels in one statement, organisation → dataset → the
caller's grant (:func:`app.writepath.admission.read_levels`), as the caller may see them (a
dataset it may not see is never locked). Two rules keep concurrent transactions, of this process or
another, from waiting on each other in a cycle:

- an admission under an organisation without a cap does not write the organisation row, so it
  shares it (``FOR SHARE``) instead of holding it alone; otherwise every admission on any
  dataset of the organisation would queue behind every other (``benchmarks/RESULTS.md``,
  *Measurements once quoted in the code*). Settle and cancel may write the cap's state and
  always hold it alone. Whether a cap is in force is guessed from the last time this process
  saw the dataset (:class:`~app.writepath.caches.OrganisationModes`); a wrong ``share`` guess is
  rolled back and the levels are locked again, the organisation alone (a shared lock is never
  upgraded: two sharers upgrading deadlock);
- several datasets locked in one transaction (:func:`lock_shared`) are locked in the order of
  their ids with every organisation row shared, and only datasets whose organisation is known
  to have no cap are put together (:func:`transactions`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from app.db.blocks import Spans, Window, queue_window
from app.db.uow import UnitOfWork
from app.writepath import write_path
from app.writepath.admission import Locked, OrgLock, read_levels, read_many_levels
from app.writepath.stored import stored


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who a transaction reads for: its idempotency keys' owner, and what it may see
    (``scope``: the one organisation it may see, ``None`` for all; ``analyst``: only the
    datasets this analyst holds a grant on, ``None`` for no such limit)."""

    owner: str
    scope: str | None
    analyst: str | None


class CapAppeared(Exception):
    """A cap came into force on a dataset's organisation since this process last saw it, in a
    transaction that locked the organisation row shared with other datasets' rows (it may not
    be upgraded there: two sharers upgrading deadlock)."""


def _prefetch(uow: UnitOfWork, owner: str, keys: Sequence[str]) -> Callable[[], None] | None:
    """Reading the stored responses of ``keys``, to follow a lock statement (``None``: none)."""
    if not keys:
        return None
    return partial(stored(uow).prefetch, owner, keys)


class _Following:
    """What follows a lock statement in its round trip: the runs of a partitioned dataset's
    spans (sent first, read later) and the stored responses of the caller's keys."""

    def __init__(
        self,
        uow: UnitOfWork,
        dataset_id: str,
        window: Spans | None,
        keys: Callable[[], None] | None,
    ) -> None:
        self.uow, self.dataset_id, self.span, self.keys = uow, dataset_id, window, keys
        self.window: Window | None = None

    def __call__(self) -> None:
        if self.span is not None:
            self.window = queue_window(self.uow.connection(), self.dataset_id, self.span)
        if self.keys is not None:
            self.keys()


def read(
    uow: UnitOfWork,
    viewer: Viewer,
    dataset_id: str,
    org_lock: OrgLock | None,
    invocation_id: str | None = None,
    keys: Sequence[str] = (),
    window: Spans | None = None,
) -> Locked | None:
    """The levels as ``viewer`` may see them (locked unless ``org_lock`` is ``None``), or
    ``None`` when it may not see the dataset; ``window``: the spans of a partitioned dataset's
    runs to read with them (:attr:`Locked.window`)."""
    following = _Following(uow, dataset_id, window, _prefetch(uow, viewer.owner, keys))
    locked = read_levels(
        uow.connection(),
        dataset_id,
        scope=viewer.scope,
        analyst=viewer.analyst,
        org_lock=org_lock,
        invocation_id=invocation_id,
        then=following if window is not None or keys else None,
    )
    if locked is not None:
        write_path(uow.database).partitions.learn(dataset_id, locked.dataset.partition_json)
        if following.window is not None:
            locked = replace(locked, window=following.window)
    return locked


def lock_levels(
    uow: UnitOfWork,
    viewer: Viewer,
    dataset_id: str,
    *,
    admitting: bool,
    invocation_id: str | None = None,
    keys: Sequence[str] = (),
    window: Spans | None = None,
) -> Locked | None:
    """Lock every level of a write on ``dataset_id`` (the module's first rule), or ``None``
    when ``viewer`` may not see it. ``keys``: the viewer's idempotency keys whose stored
    responses the transaction needs, read right after the lock statement (on PostgreSQL in its
    round trip; under the lock, so a request with the same key that committed first is seen);
    ``window``: likewise, a partitioned dataset's runs the transaction decides on.
    """
    modes = write_path(uow.database).org_modes
    org_lock: OrgLock = modes.guess(dataset_id) if admitting else "update"
    locked = read(uow, viewer, dataset_id, org_lock, invocation_id, keys, window)
    if locked is None:
        return None
    capped = locked.org.cap_json is not None
    modes.learn(dataset_id, capped)
    if capped and org_lock == "share":
        uow.rollback()  # and what the keys read: read again under the new lock
        locked = read(uow, viewer, dataset_id, "update", invocation_id, keys, window)
    return locked


def lock_shared(
    uow: UnitOfWork, viewer: Viewer, dataset_ids: Sequence[str], keys: Sequence[str] = ()
) -> dict[str, Locked]:
    """Lock the levels of several datasets in one statement, in the order of their ids, each
    organisation row shared (:func:`app.writepath.admission.read_many_levels`), as ``viewer`` may
    see them: a dataset it may not see is missing from the answer. Raises :class:`CapAppeared` when
    one of the organisations has a cap (which the process did not know of)."""
    found = read_many_levels(
        uow.connection(),
        dataset_ids,
        scope=viewer.scope,
        analyst=viewer.analyst,
        then=_prefetch(uow, viewer.owner, keys),
    )
    modes = write_path(uow.database).org_modes
    capped = [d for d, locked in found.items() if locked.org.cap_json is not None]
    for dataset_id, locked in found.items():
        modes.learn(dataset_id, locked.org.cap_json is not None)
    if capped:
        raise CapAppeared(capped[0])
    return found


def transactions(uow: UnitOfWork, by_dataset: Mapping[str, list[int]]) -> list[list[int]]:
    """Writes on several datasets (their positions by dataset, in arrival order), split into
    the transactions that may hold their locks together.

    The datasets whose organisation is known to have no cap share one transaction: their
    organisation rows are only shared, and their dataset rows are locked in the order of their
    ids. A dataset under a capped organisation holds its organisation row alone: two
    transactions holding two such rows could each wait for the other's, so each of those
    datasets gets a transaction of its own, as a request alone does. Arrival order within a
    dataset is kept in every case."""
    if len(by_dataset) == 1:
        return [sorted(i for members in by_dataset.values() for i in members)]
    guess = write_path(uow.database).org_modes.guess
    shared: list[int] = []
    alone: list[list[int]] = []
    for dataset_id, members in by_dataset.items():
        if guess(dataset_id) == "share":
            shared.extend(members)
        else:
            alone.append(members)
    return ([sorted(shared)] if shared else []) + alone
