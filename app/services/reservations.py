"""Settle and cancel: a reservation (an ODP registration) finished at every level that holds it.

Same path as a registration (:mod:`app.services.registration`): lock the levels → idempotency
lookup → settle / cancel with the pure core → stage the entry and the row → render and record
the response → commit. A settle charges the released output's cell and refunds the rest of
the reservation's ε; a cancel refunds all of it (the mechanism never ran).

Seams: the reliability tests' deliberately broken builds replace ``accounting_settle`` and
``accounting_cancel`` of this module, so the steps below call them through the module.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from app.db.rows import DatasetRow, GrantRow, InvocationRow, LevelOwners
from app.db.uow import UnitOfWork
from app.db.writes import Writes
from app.services import idempotency
from app.services._aggregate import load_filter, stage_entry
from app.services._blocks import load, stage
from app.services._common import fingerprint, utc_now
from app.services._levels import (
    ORGANISATION,
    QUOTA,
    QUOTA_GRANT,
    Uppers,
    dropped_quota_record,
    organisation_level,
    quota_level,
    wire,
)
from app.services._types import JSONObject
from app.services.errors import InvalidOutput, InvocationNotReserved, NotFound
from app.services.idempotency import RecordedResponse
from app.services.principals import Principal
from app.services.receipts import receipt_of
from app.services.responses import Finished, render_finished
from app.writepath import locking, write_path
from app.writepath.admission import Locked, lock_grant
from odometer_core.accounting import (
    Decision,
    DeclarationError,
    Reservation,
    cell_from_output,
    config_from_json,
    parse_declaration,
    state_to_json,
)
from odometer_core.accounting import cancel as accounting_cancel
from odometer_core.accounting import settle as accounting_settle
from odometer_core.accounting.blocks import Range, finish_reservation
from odometer_core.accounting.json_types import LevelPart, StateJSON
from odometer_core.accounting.levels import finish_uppers, quota_holds
from odometer_core.ledger import EntryKind
from odometer_core.ledger import output_digest as sha256_of_output
from odometer_core.ledger.blocks import ranges_from_json, ranges_json
from odometer_core.partition import window_of


class _NoOutput(Enum):
    """The type of :data:`NO_OUTPUT` (``None`` is an output: ⊥)."""

    NO_OUTPUT = "no output"


#: A settle that sent no released output (it names the cell).
NO_OUTPUT: Final = _NoOutput.NO_OUTPUT


@dataclass(frozen=True, slots=True)
class _Settle:
    """What a settle says: the cell named, the released output, its digest (when sent)."""

    cell: str | None
    output: object
    digest: str | None

    def request(self) -> JSONObject:
        """The fields that give the request its meaning (the idempotency fingerprint's): an
        output's digest only when one was sent, so that cell-only fingerprints are as before."""
        out: JSONObject = {"cell": self.cell}
        if self.digest is not None:
            out["output_digest"] = self.digest
        return out


def settle_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    invocation_id: str,
    cell: str | None,
    idempotency_key: str | None = None,
    *,
    output: object = NO_OUTPUT,
) -> RecordedResponse:
    """Charge the released output's cell and refund the rest of the reservation (ε only).

    The cell is named (``cell``), derived from the released ``output`` by the template
    (:func:`odometer_core.accounting.cell_from_output`), or both, which must agree; an output's
    SHA-256 over canonical JSON is recorded in the settle entry (``request.output_digest``).
    """
    if output is NO_OUTPUT:
        if cell is None:
            raise InvalidOutput("send the cell, the released output, or both", field="cell")
        settling = _Settle(cell, output, None)
    else:
        settling = _Settle(cell, output, _digest(output))
    return _finish(uow, principal, dataset_id, invocation_id, settling, idempotency_key)


def cancel_invocation(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    invocation_id: str,
    idempotency_key: str | None = None,
) -> RecordedResponse:
    """Release a reservation whose mechanism never ran (full refund)."""
    return _finish(uow, principal, dataset_id, invocation_id, None, idempotency_key)


def _digest(output: object) -> str:
    try:
        return sha256_of_output(output)
    except (TypeError, ValueError) as exc:
        raise InvalidOutput(
            f"the output cannot be recorded: {exc} (send numbers as integers or decimal "
            "strings: the ledger records the SHA-256 of its canonical JSON, which has no "
            "binary floats)",
            field="output",
        ) from None


def _settled_cell(inv: InvocationRow, settling: _Settle) -> str:
    """The cell to charge: the one named, or the one the released output lies in (both sent:
    they must agree). Checked before anything is staged: a refusal changes nothing."""
    if settling.output is NO_OUTPUT:
        assert settling.cell is not None
        return settling.cell
    assert inv.declaration is not None
    try:
        derived = cell_from_output(parse_declaration(inv.declaration), settling.output)
    except DeclarationError as exc:
        raise InvalidOutput(exc.detail, field="output") from None
    if settling.cell is not None and settling.cell != derived:
        raise InvalidOutput(
            f"the cell named, '{settling.cell}', contradicts the output, which lies in "
            f"cell '{derived}'",
            field="cell",
            derived_cell=derived,
        )
    return derived


def _finish(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    invocation_id: str,
    settling: _Settle | None,
    idempotency_key: str | None,
) -> RecordedResponse:
    """Settle (``settling``) or cancel (``None``) a reservation at every level that holds it."""
    if settling is None:
        digest = fingerprint(
            "cancel_invocation", dataset_id=dataset_id, invocation_id=invocation_id, cell=None
        )
    else:
        digest = fingerprint(
            "settle_invocation",
            dataset_id=dataset_id,
            invocation_id=invocation_id,
            **settling.request(),
        )
    with write_path(uow.database).turn(dataset_id), uow.core():
        # One statement locks organisation → dataset → grant (settle may write the cap's
        # state, so the organisation is held alone) and reads the invocation the dataset owns.
        locked = locking.lock_levels(
            uow,
            principal.viewer,
            dataset_id,
            admitting=False,
            invocation_id=invocation_id,
            keys=() if idempotency_key is None else (idempotency_key,),
        )
        if locked is None:
            raise NotFound(f"dataset '{dataset_id}' not found")
        stored = idempotency.stored_response(uow, principal.id, idempotency_key, digest)
        if stored is not None:
            return stored
        inv = _reserved_invocation(principal, locked, invocation_id)
        cell = None if settling is None else _settled_cell(inv, settling)
        output_digest = None if settling is None else settling.digest
        quota_grant, uppers, dropped = _holding_levels(uow, inv, locked)
        writes = Writes()
        finished = _stage(
            uow, writes, principal, locked.dataset, inv, uppers, cell, output_digest, dropped
        )
        response = render_finished(finished, receipt_of(uow.signer, locked.dataset))
        idempotency.record_response(
            uow, writes, principal.id, idempotency_key, digest, dataset_id, response
        )
        idempotency.write_rows(
            uow, writes, [locked.dataset], locked.org, [locked.grant, quota_grant]
        )
        idempotency.commit(uow)
    return response


def _reserved_invocation(principal: Principal, locked: Locked, invocation_id: str) -> InvocationRow:
    """The locked dataset's invocation; analysts only see their own (others' are 404, like
    missing ones)."""
    inv = locked.invocation
    if inv is None or not principal.sees_invocation_of(inv.actor):
        raise NotFound(f"invocation '{invocation_id}' not found")
    if inv.status != "reserved" or inv.reservation is None:
        raise InvocationNotReserved(
            f"invocation '{invocation_id}' is {inv.status}, not reserved", status=inv.status
        )
    return inv


def _holding_levels(
    uow: UnitOfWork, inv: InvocationRow, locked: Locked
) -> tuple[GrantRow | None, Uppers, LevelPart | None]:
    """The upper levels that reserved ``inv`` get the same settle / cancel, and the grant
    locked for it when it is not the caller's.

    The quota holds the reservation only while the grant that reserved is in force
    (:func:`~odometer_core.accounting.levels.quota_holds`): a grant revoked since, or replaced
    by a new grant of the analyst, took its quota with it, and the reservation's quota share
    is dropped (the third value: what the entry records of it); the quota in force now, which
    reserved nothing, is not touched."""
    held: LevelOwners = inv.levels or {}
    quota_owner = held.get(QUOTA)
    grant, other = locked.grant, None
    if quota_owner is not None and (grant is None or grant.principal_id != quota_owner):
        # Settled by someone else (the admin): the quota is the invocation's analyst's.
        # Still the last lock taken, so the fixed order holds.
        grant = other = lock_grant(uow.connection(), locked.dataset.id, quota_owner)
    quota, dropped = None, None
    if quota_owner is not None:
        reserved_under = held.get(QUOTA_GRANT)
        in_force = quota_level(grant)
        if in_force is not None and quota_holds(reserved_under, in_force.granted_seq):
            quota = in_force
        else:
            dropped = dropped_quota_record(quota_owner, reserved_under)
    relation = locked.dataset.relation
    organisation = (
        organisation_level(locked.org, relation, admitting=False)
        if held.get(ORGANISATION)
        else None
    )
    return other, Uppers(organisation, quota), dropped


def _stage(
    uow: UnitOfWork,
    writes: Writes,
    principal: Principal,
    ds: DatasetRow,
    inv: InvocationRow,
    uppers: Uppers,
    cell: str | None,
    output_digest: str | None = None,
    dropped: LevelPart | None = None,
) -> Finished:
    """Settle / cancel at the dataset and the levels above; stage the entry and the row
    (``dropped``: the quota share that no quota holds any more, recorded as it is)."""
    assert inv.reservation is not None
    config, state = load_filter(ds)
    reservation = Reservation.from_json(inv.reservation)
    status = "cancelled" if cell is None else "settled"
    request = _settle_request(cell, output_digest)
    if ds.partition_json is not None:
        decision, entry_state, retired = _finish_blocks(uow, writes, ds, inv, reservation, cell)
        request["blocks"] = (inv.request or {}).get("blocks")
        if retired:  # which of its blocks were retired since it was made (replay checks it)
            request["retired"] = ranges_json(retired)
    else:
        if cell is None:
            decision = accounting_cancel(config, state, reservation)
        else:
            decision = accounting_settle(config, state, reservation, cell)
        entry_state = state_to_json(decision.state)
    outcomes = finish_uppers(uppers.filters(), reservation, cell)
    records = uppers.apply(outcomes, applied=True, budget=False)
    at = utc_now()
    seq = stage_entry(
        uow,
        writes,
        ds,
        kind=EntryKind.for_invocation(status),
        actor=principal.id,
        at=at,
        invocation_id=inv.id,
        request=request,
        charge=wire(decision.charge),
        requested=wire(decision.requested),
        refund=wire(decision.refund),
        reservation=inv.reservation,
        state=entry_state,
        org=records.get(ORGANISATION),
        quota=records.get(QUOTA, dropped),
    )
    inv.status, inv.cell, inv.updated_at = status, cell, at
    inv.charge, inv.refund = wire(decision.charge), wire(decision.refund)
    writes.finished.append(inv)
    return Finished(inv.id, ds.id, status, cell, decision, outcomes, seq, at, output_digest)


def _finish_blocks(
    uow: UnitOfWork,
    writes: Writes,
    ds: DatasetRow,
    inv: InvocationRow,
    reservation: Reservation,
    cell: str | None,
) -> tuple[Decision, StateJSON, tuple[Range, ...]]:
    """Settle or cancel a reservation on every block it was made on that is still open (each
    distinct history once), whatever happened to the others: blocks retired since are gone
    with what they held, their reading (this reservation at its worst cell) kept in the
    dataset's maintained reading when they were retired
    (:func:`odometer_core.accounting.blocks.finish_reservation`). The summary decision, the
    dataset's aggregate state after it, and the ranges retired since."""
    ranges = ranges_from_json((inv.request or {}).get("blocks"))
    config = config_from_json(ds.config_json)
    store = load(uow.connection(), ds, config, window_of([ranges]))
    finished = finish_reservation(config, store.blocks, ranges, reservation, cell)
    store.moved(finished.blocks)
    store.touched(ranges)
    stage(writes, ds.id, store)
    return finished.decision, store.aggregate(ranges).to_json(), finished.retired


def _settle_request(cell: str | None, output_digest: str | None) -> JSONObject:
    """The entry's ``request``: ``{}`` for a cancel, the cell for a settle, and the released
    output's digest when it was sent (absent otherwise, as in every earlier entry)."""
    if cell is None:
        return {}
    if output_digest is None:
        return {"cell": cell}
    return {"cell": cell, "output_digest": output_digest}
