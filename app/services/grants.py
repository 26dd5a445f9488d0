"""Grants: which analysts may spend on a dataset, each optionally within a quota.

A quota is one more privacy filter over a subset of the dataset's invocations (the analyst's),
in the dataset's own mode and parameters with the quota as target — sound for the same reason
the dataset's filter is. ``split`` datasets get ``basic`` quotas (the sub-budget choice is per
invocation, a quota spans them; basic composition of each invocation's (ε, δ) is sound for
any mix). Granting and revoking are ``grant_changed`` entries of the dataset's ledger, so a
replay can follow every quota; revoking forgets the quota's state (a new grant starts afresh).

A grant is named by the ``seq`` of the entry that made it (``granted_seq``): an invocation
records the grant whose quota holds it, and a reservation made under a grant revoked since is
finished at the dataset and the organisation only, its quota share dropped with the grant
(:func:`odometer_core.accounting.levels.quota_holds`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import NotRequired, TypedDict

from app.db.models import Grant
from app.db.uow import UnitOfWork
from app.services._aggregate import append_entry, load_filter, visible_dataset
from app.services._common import utc_now
from app.services._types import JSONObject
from app.services.errors import AlreadyExists, NotFound, ServiceError
from app.services.principals import Principal, Role
from odometer_core.accounting import (
    AccountingConfig,
    config_from_json,
    config_to_json,
    fmt,
    initial_state,
    make_config,
    parse_amount,
    state_from_json,
    state_to_json,
    status,
)
from odometer_core.accounting.filters import ConfigError, SplitConfig
from odometer_core.accounting.json_types import StateJSON, Summary
from odometer_core.accounting.modes import Unusable, UnusableBudget, unusable
from odometer_core.accounting.summary import compose
from odometer_core.ledger import EntryKind


class NotAnAnalyst(ServiceError):
    """Grants are for analysts (auditors read their whole organisation without one)."""

    code = "NotAnAnalyst"


class QuotaUnusable(TypedDict):
    """Why a quota can never admit anything, the fix, and a budget that would
    (:meth:`~odometer_core.accounting.modes.Unusable`'s ε and δ)."""

    reason: str
    fix: str
    budget: dict[str, str]


class QuotaJson(TypedDict):
    """A grant's quota as its view shows it: its (ε, δ) as stored (decimal text)."""

    epsilon: str
    delta: str
    unusable: NotRequired[QuotaUnusable]


class GrantView(TypedDict):
    """A grant as the routes show it (``GrantOut``)."""

    dataset_id: str
    principal_id: str
    quota: QuotaJson | None
    quota_state: StateJSON | None  # the quota filter's state, as stored
    quota_summary: Summary | None  # :func:`~odometer_core.accounting.summary.compose`
    created_by: str
    created_at: str


class GrantList(TypedDict):
    grants: list[GrantView]


class QuotaReading(TypedDict):
    """A quota's budget and reading, as an analyst's home shows it (``QuotaOut``)."""

    budget: dict[str, str]
    summary: Summary  # :func:`~odometer_core.accounting.summary.compose`


class MyGrant(TypedDict):
    dataset_id: str
    dataset_name: str | None
    quota: QuotaReading | None


class Me(TypedDict):
    """The caller (``GET /v1/me``, ``Me``)."""

    id: str
    name: str
    role: str
    organisation: str | None
    grants: list[MyGrant]


def quota_config(dataset: AccountingConfig, epsilon: object, delta: object) -> AccountingConfig:
    """The quota's filter: the dataset's mode and parameters, the quota's (ε, δ) as target
    (conversion δ capped at the quota's δ)."""
    eps, dlt = parse_amount(epsilon, "epsilon"), parse_amount(delta, "delta")
    params = config_to_json(dataset)
    mode = params["mode"]
    accounting: JSONObject  # what the core's make_config reads
    if mode == "basic":
        accounting = {
            "mode": "basic",
            "conversion_delta": fmt(min(Decimal(params["conversion_delta"]), dlt)),
        }
    elif mode in ("zcdp", "rdp"):
        accounting = {
            "mode": mode,
            "final_conversion_delta": fmt(min(Decimal(params["final_conversion_delta"]), dlt)),
        }
        if mode == "rdp":
            accounting["orders"] = [float(a) for a in params["orders"]]
            accounting["weights"] = [float(w) for w in params["weights"]]
    elif mode == "gdp":
        accounting = {"mode": "gdp"}
    else:
        accounting = {"mode": "basic"}
    try:
        return make_config(eps, dlt, dataset.relation, accounting)
    except UnusableBudget as exc:
        raise UnusableBudget(_quota_words(dataset, exc.problem), exc.problem) from None


def _quota_words(dataset: AccountingConfig, problem: Unusable) -> str:
    """Why a quota could never admit anything, and a quota that would (its ``epsilon`` and
    ``delta``: the conversion δ of a quota follows the dataset's), checked as a quota."""
    words = f"the quota: {problem.reason}"
    suggested = {k: problem.budget[k] for k in ("epsilon", "delta")}
    try:
        quota_config(dataset, suggested["epsilon"], suggested["delta"])
    except ConfigError:
        return f"{words}; grant a quota with delta > 0 (or a larger epsilon)"
    return (
        f"{words}; grant a quota that converts, e.g. epsilon = {suggested['epsilon']}, "
        f"delta = {suggested['delta']}"
    )


def quota_unusable(grant: Grant) -> QuotaUnusable | None:
    """Why a quota stored before such quotas were refused can never admit anything, and the
    fix (revoke the grant and grant a quota that converts), or ``None``."""
    if grant.quota_config_json is None:
        return None
    config = config_from_json(grant.quota_config_json)
    if isinstance(config, SplitConfig):
        return None
    problem = unusable(config)
    if problem is None:
        return None
    suggested = {k: problem.budget[k] for k in ("epsilon", "delta")}
    return {
        "reason": problem.reason,
        "fix": (
            "revoke the grant and grant it again with a quota that converts, e.g. "
            f"epsilon = {suggested['epsilon']}, delta = {suggested['delta']}"
        ),
        "budget": suggested,
    }


def grant_view(grant: Grant) -> GrantView:
    quota = grant.quota_config_json
    reading = _quota_view(grant)
    return {
        "dataset_id": grant.dataset_id,
        "principal_id": grant.principal_id,
        "quota": None if quota is None else _quota_json(grant),
        "quota_state": grant.quota_state_json,
        "quota_summary": None if reading is None else reading["summary"],
        "created_by": grant.created_by,
        "created_at": grant.created_at,
    }


def _quota_json(grant: Grant) -> QuotaJson:
    """A grant's quota (ε, δ); ``unusable`` too for one that can never admit anything."""
    quota = grant.quota_config_json
    assert quota is not None
    out: QuotaJson = {"epsilon": quota["epsilon"], "delta": quota["delta"]}
    problem = quota_unusable(grant)
    if problem is not None:
        out["unusable"] = problem
    return out


def create_grant(
    uow: UnitOfWork,
    caller: Principal,
    dataset_id: str,
    principal_id: str,
    quota: tuple[object, object] | None,
) -> GrantView:
    """Let an analyst of the dataset's organisation spend on it (curator; a ledger entry)."""
    caller.require(Role.CURATOR)
    with uow:
        ds = visible_dataset(uow, caller, dataset_id, lock=True)
        analyst = uow.principals.get(principal_id)
        if analyst is None or analyst.organisation_id != ds.organisation:
            raise NotFound(f"principal '{principal_id}' not found")
        if analyst.role != Role.ANALYST.value:
            raise NotAnAnalyst(f"principal '{principal_id}' is a {analyst.role}, not an analyst")
        if uow.grants.get(ds.id, principal_id) is not None:
            raise AlreadyExists(
                f"'{principal_id}' is already granted on '{dataset_id}' (revoke to change it)"
            )
        config_json = state_json = None
        if quota is not None:
            config = quota_config(load_filter(ds)[0], *quota)
            config_json = config_to_json(config)
            state_json = state_to_json(initial_state(config))
        at = utc_now()
        seq = append_entry(
            uow,
            ds,
            kind=EntryKind.GRANT_CHANGED,
            actor=caller.id,
            at=at,
            request={"principal_id": principal_id, "granted": True},
            state=ds.state_json,
            quota={"id": principal_id, "config": config_json, "state": state_json},
        )
        grant = Grant(
            dataset_id=ds.id,
            principal_id=principal_id,
            quota_config_json=config_json,
            quota_state_json=state_json,
            created_by=caller.id,
            created_at=at,
            granted_seq=seq,  # this grant, told apart from the analyst's earlier ones
        )
        uow.grants.add(grant)
        view = grant_view(grant)
        uow.commit()
    return view


def whoami(uow: UnitOfWork, caller: Principal) -> Me:
    """The caller (``GET /v1/me``): identity and role, and for an analyst every grant with its
    quota's budget and summary (:mod:`odometer_core.accounting.summary`): what a dashboard
    home shows each role."""
    with uow.read_only():
        row = uow.principals.get(caller.id)
        grants: list[MyGrant] = []
        if caller.role is Role.ANALYST:
            for grant in uow.grants.for_principal(caller.id):
                ds = uow.datasets.get(grant.dataset_id)
                grants.append(
                    {
                        "dataset_id": grant.dataset_id,
                        "dataset_name": None if ds is None else ds.name,
                        "quota": _quota_view(grant),
                    }
                )
    return {
        "id": caller.id,
        "name": caller.id if row is None else row.name,
        "role": caller.role.value,
        "organisation": caller.organisation,
        "grants": grants,
    }


def _quota_view(grant: Grant) -> QuotaReading | None:
    if grant.quota_config_json is None or grant.quota_state_json is None:
        return None
    config = config_from_json(grant.quota_config_json)
    view = status(config, state_from_json(config, grant.quota_state_json))
    return {"budget": view["budget"], "summary": compose(view)}


def list_grants(uow: UnitOfWork, caller: Principal, dataset_id: str) -> GrantList:
    """The dataset's grants (curators and auditors of its organisation)."""
    caller.require(Role.CURATOR, Role.AUDITOR)
    with uow.read_only():
        ds = visible_dataset(uow, caller, dataset_id, lock=False)
        return {"grants": [grant_view(g) for g in uow.grants.for_dataset(ds.id)]}


def delete_grant(
    uow: UnitOfWork, caller: Principal, dataset_id: str, principal_id: str
) -> GrantView:
    """Revoke a grant (curator; a ledger entry). The quota's state is dropped with it."""
    caller.require(Role.CURATOR)
    with uow:
        ds = visible_dataset(uow, caller, dataset_id, lock=True)
        grant = uow.grants.get_for_update(ds.id, principal_id)
        if grant is None:
            raise NotFound(f"no grant for '{principal_id}' on '{dataset_id}'")
        view = grant_view(grant)
        uow.grants.delete(grant)
        append_entry(
            uow,
            ds,
            kind=EntryKind.GRANT_CHANGED,
            actor=caller.id,
            at=utc_now(),
            request={"principal_id": principal_id, "granted": False},
            state=ds.state_json,
            quota={"id": principal_id, "config": None, "state": None},
        )
        uow.commit()
    return view
