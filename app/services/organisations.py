"""Organisations and their cap across datasets.

The cap rule: an organisation's cap is one privacy filter, in the curator's currency (``basic``,
``zcdp``, ``rdp`` or ``gdp``: :func:`odometer_core.accounting.levels.cap_config`), over every
invocation on every dataset of the organisation. Each invocation is charged at the cap from its
declaration by the cap mode's own conversion, under its dataset's neighbouring relation; a
declaration the cap's mode cannot account is refused (422). The filter theorems apply under the
product relation (``docs/accounting.md``, *Organisation caps*). ODP: a ``basic`` cap reserves the
worst cell and settles or cancels as the dataset does; a curve cap charges the worst cell,
keeps it on settle and releases it on cancel.

The cap counts invocations admitted while a cap is in force; removing the cap keeps the
counted filter, and a new cap continues from it (:func:`odometer_core.accounting.levels.
change_cap`: its mode is fixed once it counted something, and a change never goes below what is
counted or certified). A curator may instead **replace** a cap that has counted, in any mode
(:func:`odometer_core.accounting.levels.replace_cap`): its certified reading is kept as a closed
statement and the new cap counts from then on; the organisation's statement is their sum
(``docs/accounting.md``, *Cap replacement*).

No cap write (set, change, remove, replace) is taken while a dataset of the organisation is
behind its witness (409 ``LedgerBehindWitness``): the counted state may have been rolled back
with it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, TypedDict

from sqlalchemy import func, select

from app.db.models import Dataset, Invocation, Organisation
from app.db.repositories import LedgerFilter
from app.db.uow import UnitOfWork
from app.services._aggregate import behind_witness, visible_dataset
from app.services._common import new_id, utc_now
from app.services._levels import cap_filter, new_organisation_row
from app.services._types import JSONObject
from app.services.errors import AlreadyExists, LedgerBehindWitness, NoCap, NotFound
from app.services.ledger import BATCH_SIZE
from app.services.principals import Principal, Role
from app.writepath import write_path
from odometer_core.accounting import (
    AccountingConfig,
    Declaration,
    FilterState,
    capacity,
    config_to_json,
    eps_delta_guarantee,
    fmt,
    initial_state,
    state_to_json,
    status,
)
from odometer_core.accounting.filters import CAPACITY_LIMIT
from odometer_core.accounting.levels import (
    CAP_RELATION,
    ClosedPhase,
    change_cap,
    check_cap_accounts,
    replace_cap,
    statement_sum,
)
from odometer_core.accounting.modes.common import ConfigError, InvalidTransition
from odometer_core.accounting.summary import compose
from odometer_core.ledger.organisation import replay_organisation


class CapView(TypedDict):
    """The cap in force: its target (decimal text, as stored) and mode."""

    epsilon: str
    delta: str
    mode: str


class OrganisationView(TypedDict):
    """What curators see of an organisation (:func:`organisation_view`; ``OrganisationOut``).
    The amounts, status, guarantee and summary are the core's views of the cap's filter."""

    id: str
    name: str
    cap: CapView | None
    spent: Mapping[str, Any]
    reserved: Any
    remaining: Any
    status: Mapping[str, Any]
    guarantee: dict[str, str] | None
    summary: Mapping[str, Any] | None
    #: the closed phases of caps replaced after they counted, as stored
    closed: list[Mapping[str, Any]]
    statement: Mapping[str, Any]  # :func:`organisation_statement`
    cap_seq: int
    usage: dict[str, int]
    created_at: str
    updated_at: str


class OrganisationList(TypedDict):
    organisations: list[OrganisationView]


class OrganisationReport(TypedDict):
    """The cap's decisions replayed (:func:`organisation_report`; ``OrganisationReport``)."""

    organisation: OrganisationView
    verified: bool
    problems: list[str]
    decisions: int
    odometer: Mapping[str, Any] | None
    closed: Sequence[Mapping[str, Any]]
    statement: Mapping[str, Any] | None
    #: each dataset's identity and what it drew from the cap (the replay's per dataset)
    datasets: list[Mapping[str, Any]]


def organisation_view(org: Organisation) -> OrganisationView:
    """What curators see of an organisation: the cap in force (its mode and target), and its
    filter's status in the cap's currency, certified reading included (``status``; the
    counted filter is shown when no cap is in force too)."""
    config, state = cap_filter(org, CAP_RELATION)
    counted = status(config, state)
    return {
        "id": org.id,
        "name": org.name,
        "cap": None if org.cap_json is None else _cap_view(org.cap_json),
        "spent": counted["spent"],
        "reserved": counted.get("reserved"),
        "remaining": counted["remaining"] if org.cap_json else None,
        "status": counted,
        "guarantee": eps_delta_guarantee(config) if org.cap_json else None,
        "summary": compose(counted) if org.cap_json else None,
        "closed": list(org.cap_closed_json or []),
        "statement": organisation_statement(org.cap_closed_json, config, state),
        "cap_seq": org.cap_seq,
        "usage": org.cap_usage_json or {},
        "created_at": org.created_at,
        "updated_at": org.updated_at,
    }


def organisation_statement(
    closed: Sequence[Mapping[str, Any]] | None, config: AccountingConfig, state: FilterState
) -> JSONObject:
    """The organisation's (ε, δ) statement: the closed phases of caps replaced after they
    counted, plus the certified reading of the cap in force when it has counted something
    (:func:`~odometer_core.accounting.levels.statement_sum`: basic composition of the phases,
    ``docs/accounting.md``, *Cap replacement*), with a sentence that says so."""
    phases = [ClosedPhase.from_json(p) for p in closed or []]
    total = statement_sum(phases, config, state)
    if not phases:
        note = "the certified reading of the cap in force: no cap was replaced"
    elif total["phases"] == len(phases):
        note = (
            f"the sum of {len(phases)} closed cap phase(s) (basic composition of the phases, "
            "valid under full adaptivity); the cap in force has counted nothing yet: once it "
            "does, its reading is added, and the δ exceeds every phase's alone"
        )
    else:
        note = (
            f"the sum of {len(phases)} closed cap phase(s) and the reading of the cap in force "
            "(basic composition of the phases, valid under full adaptivity); its δ "
            f"({total['delta']}) now exceeds the first cap's ({fmt(phases[0].delta)}) and every "
            "phase's alone"
        )
    return {**total, "note": note}


def _cap_view(cap: Mapping[str, Any]) -> CapView:
    """The cap in force: its target and mode (``basic`` on rows written before caps had one)."""
    return {"epsilon": cap["epsilon"], "delta": cap["delta"], "mode": cap.get("mode", "basic")}


def create_organisation(uow: UnitOfWork, caller: Principal, name: str) -> OrganisationView:
    """Create an organisation (admin)."""
    caller.require(Role.ADMIN)
    with uow:
        if uow.organisations.by_name(name) is not None:
            raise AlreadyExists(f"an organisation named '{name}' exists")
        org = new_organisation_row(new_id("org"), name)
        uow.organisations.add(org)
        view = organisation_view(org)
        uow.commit()
    return view


def list_organisations(uow: UnitOfWork, caller: Principal) -> OrganisationList:
    """All organisations for the admin, the caller's own otherwise."""
    with uow.read_only():
        rows = uow.organisations.list(None if caller.is_admin else caller.organisation or "")
        return {"organisations": [organisation_view(o) for o in rows]}


def set_cap(
    uow: UnitOfWork,
    caller: Principal,
    organisation_id: str,
    cap: tuple[object, object] | None,
    accounting: Mapping[str, Any] | None = None,
    *,
    replace: bool = False,
) -> OrganisationView:
    """Set, change or remove (``None``) the cap ``(ε, δ)`` in ``accounting``'s mode (default
    ``basic``): any mode while nothing is counted, then the same mode, never below what is
    counted or certified (409). ``replace``: a new cap in any mode, the counted one's reading
    closed (:func:`~odometer_core.accounting.levels.replace_cap`; 409 ``ReservationsOpen``
    while a reservation of the organisation is open). Refused while a dataset of the
    organisation is behind its witness (409 ``LedgerBehindWitness``); nothing changes."""
    caller.require(Role.CURATOR)
    with uow:
        org = uow.organisations.get_for_update(organisation_id)
        if org is None or not caller.can_see(org.id):
            raise NotFound(f"organisation '{organisation_id}' not found")
        _refuse_if_frozen(uow, org)
        if cap is None:
            if replace:
                raise ConfigError("a replacement names the new cap: epsilon, delta and its mode")
            org.cap_json = None
        elif replace:
            config, state = cap_filter(org, CAP_RELATION)
            if state != initial_state(config):
                _refuse_if_reserved(uow, org)
            new_config, new_state, closed = replace_cap(
                config, state, *cap, accounting, org.cap_seq
            )
            if closed is not None:
                org.cap_closed_json = [*(org.cap_closed_json or []), closed.to_json()]
        else:
            config, state = cap_filter(org, CAP_RELATION)
            new_config, new_state = change_cap(config, state, *cap, accounting)
        if cap is not None:
            org.cap_config_json = config_to_json(new_config)
            org.cap_state_json = state_to_json(new_state)
            org.cap_config_seq = None  # the next entry at the cap records the new configuration
            org.cap_json = {
                "epsilon": fmt(new_config.epsilon),
                "delta": fmt(new_config.delta),
                "mode": new_config.mode,
            }
        org.updated_at = utc_now()
        view = organisation_view(org)
        uow.commit()
    return view


def _refuse_if_frozen(uow: UnitOfWork, org: Organisation) -> None:
    """409 ``LedgerBehindWitness`` when a dataset of ``org`` is behind its witness (frozen by
    a check, or found behind a head this process committed): the cap's counted state may have
    been rolled back with its ledger. The datasets' rows are locked (organisation → dataset,
    the lock order everywhere), so their heads are the committed ones."""
    witness = write_path(uow.database).witness
    if witness is None or uow.recovering:
        return
    rows = uow.session.scalars(
        select(Dataset)
        .where(Dataset.organisation == org.id)
        .order_by(Dataset.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).all()
    for ds in rows:
        behind = witness.behind(ds.id, ds.last_seq, ds.head_hash)
        if behind is not None:
            refusal = behind_witness(behind)
            raise LedgerBehindWitness(
                f"organisation '{org.id}' takes no cap change while its dataset '{ds.id}' is "
                f"behind the witness (the cap's count may have been rolled back with it): "
                f"{refusal.detail}",
                organisation_id=org.id,
                **refusal.fields,
            )


def _refuse_if_reserved(uow: UnitOfWork, org: Organisation) -> None:
    """409 ``ReservationsOpen`` while an invocation on a dataset of ``org`` is reserved: the
    counted cap holds its share, which a settle or cancel finishes there; the cap is replaced
    once they are finished."""
    open_ = uow.session.scalar(
        select(func.count())
        .select_from(Invocation)
        .join(Dataset, Dataset.id == Invocation.dataset_id)
        .where(Dataset.organisation == org.id, Invocation.status == "reserved")
    )
    if open_:
        raise InvalidTransition(
            "ReservationsOpen",
            f"organisation '{org.id}' has {open_} open reservation(s): a reservation is "
            "finished at the cap filter that reserved it, which a replacement closes; settle "
            "or cancel them, then replace the cap",
        )


def cap_capacity(
    uow: UnitOfWork,
    caller: Principal,
    organisation_id: str,
    declaration: Declaration,
    *,
    dataset_id: str | None = None,
    conversion_delta: Decimal | None = None,
) -> JSONObject:
    """How many more of ``declaration`` the cap admits if nothing else runs
    (:func:`odometer_core.accounting.capacity`), under ``dataset_id``'s relation (default
    ``add_remove``); 409 ``NoCap`` when no cap is in force."""
    with uow.read_only():
        org = uow.organisations.get(organisation_id)
        if org is None or not caller.can_see(org.id):
            raise NotFound(f"organisation '{organisation_id}' not found")
        relation: str = CAP_RELATION
        if dataset_id is not None:
            ds = visible_dataset(uow, caller, dataset_id, lock=False)
            if ds.organisation != org.id:
                raise NotFound(f"dataset '{dataset_id}' not found in organisation '{org.id}'")
            relation = ds.relation
        if org.cap_json is None:
            raise NoCap(f"organisation '{org.id}' has no cap in force")
        config, state = cap_filter(org, relation)
    check_cap_accounts(config, declaration, org.id)  # the registration's 422, not the mode's
    found = capacity(config, state, declaration, conversion_delta=conversion_delta)
    return {
        "organisation": org.id,
        "mode": config.mode,
        "relation": relation,
        **found.to_json(),
        "limit": CAPACITY_LIMIT,
    }


def _cap_parts(uow: UnitOfWork, dataset_id: str, head: int) -> Iterator[JSONObject]:
    """A dataset's first entry and its entries with an organisation part, up to ``head``, read
    in batches of :data:`~app.services.ledger.BATCH_SIZE`, each in its own short read
    transaction (the ledger is append-only), as the cap's replay asks for them."""
    after = 0
    while after < head:
        with uow.read_only():
            rows = uow.ledger.page(
                dataset_id,
                after_seq=after,
                limit=BATCH_SIZE,
                up_to_seq=head,
                where=LedgerFilter(cap_parts=True),
            )
            batch = [r.to_export() for r in rows]
        if not batch:
            return
        yield from batch
        after = batch[-1]["seq"]


def organisation_report(
    uow: UnitOfWork, caller: Principal, organisation_id: str
) -> OrganisationReport:
    """The cap's decisions replayed from every dataset's ledger in their organisation order
    (:func:`odometer_core.ledger.organisation.replay_organisation`), with what each dataset
    drew from it; checked against the stored state when no cap change is pending."""
    caller.require(Role.CURATOR, Role.AUDITOR)
    with uow.read_only():
        org = uow.organisations.get(organisation_id)
        if org is None or not caller.can_see(org.id):
            raise NotFound(f"organisation '{organisation_id}' not found")
        view = organisation_view(org)
        up_to, settled = org.cap_seq, org.cap_config_seq is not None
        stored = org.cap_state_json
        datasets = uow.datasets.of_organisation(org.id)
        heads = {d.id: d.last_seq for d in datasets}
        names = {d.id: (d.name, d.mode, d.relation) for d in datasets}
    # every entry up to the cap's number read first is committed: each ledger is read after
    ledgers = [_cap_parts(uow, d, head) for d, head in heads.items()]
    verdict = replay_organisation(ledgers, up_to=up_to)
    problems = list(verdict.problems)
    if verdict.ok and settled and verdict.state is not None and verdict.state != stored:
        problems.append("the cap's stored state differs from the replayed state")
    if verdict.ok and verdict.closed != (view["closed"][: len(verdict.closed)]):
        problems.append("the closed caps stored differ from those the ledgers record")
    drawn = verdict.datasets
    return {
        "organisation": view,
        "verified": not problems,
        "problems": problems,
        "decisions": verdict.decisions,
        "odometer": verdict.odometer,
        "closed": verdict.closed,
        "statement": verdict.statement,
        "datasets": [
            {
                "id": d,
                "name": name,
                "mode": mode,
                "relation": relation,
                **drawn.get(d, {"decisions": 0, "admitted": 0, "drawn": {}}),
            }
            for d, (name, mode, relation) in names.items()
        ],
    }
