"""Who may see a dataset is one rule (:mod:`app.db.visibility`), and every reader applies it:
the write path's lock statements (one dataset and several, locking or not), the ORM's read and
lock of one dataset, and the listing. Each caller kind is checked against the rule as the API
states it (admin: all; curators and auditors: their organisation; analysts: the datasets of
their organisation they hold a grant on)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from app.db.uow import Database, UnitOfWork
from app.services import datasets, grants, organisations, principals
from app.services._aggregate import visible_dataset
from app.services.errors import NotFound
from app.services.principals import Principal, Role
from app.writepath import admission

ADMIN = Principal("admin", Role.ADMIN, None)


@dataclass(frozen=True, slots=True)
class World:
    """Two organisations, two datasets each; one analyst of ``a`` granted on ``a1`` only."""

    datasets: dict[str, str]  # name → id
    organisation: dict[str, str]  # dataset name → organisation id
    callers: dict[str, Principal]
    granted: dict[str, set[str]]  # analyst id → dataset names


def _principal(database: Database, org: str, role: Role) -> Principal:
    view = principals.create_principal(UnitOfWork(database), ADMIN, f"{role}-{org}", role, org)
    return Principal(view["id"], role, org)


@pytest.fixture(scope="module")
def world(database: Database) -> Iterator[World]:
    run = secrets.token_hex(4)
    orgs = {
        name: organisations.create_organisation(UnitOfWork(database), ADMIN, f"vis-{name}-{run}")[
            "id"
        ]
        for name in "ab"
    }
    ids, owner = {}, {}
    for name in ("a1", "a2", "b1", "b2"):
        new = datasets.NewDataset(
            name=name,
            epsilon="1",
            delta="0.00001",
            relation="add_remove",
            accounting={"mode": "basic"},
            organisation_id=orgs[name[0]],
        )
        ids[name] = datasets.create_dataset(UnitOfWork(database), ADMIN, new)["id"]
        owner[name] = orgs[name[0]]
    callers = {
        "admin": ADMIN,
        "curator a": _principal(database, orgs["a"], Role.CURATOR),
        "auditor a": _principal(database, orgs["a"], Role.AUDITOR),
        "granted analyst a": _principal(database, orgs["a"], Role.ANALYST),
        "ungranted analyst a": _principal(database, orgs["a"], Role.ANALYST),
        "curator b": _principal(database, orgs["b"], Role.CURATOR),
    }
    granted = callers["granted analyst a"]
    grants.create_grant(UnitOfWork(database), ADMIN, ids["a1"], granted.id, None)
    yield World(ids, owner, callers, {granted.id: {"a1"}})


def _expected(world: World, caller: Principal) -> set[str]:
    """The rule as the API documents it, written independently of the code under test."""
    if caller.is_admin:
        return set(world.datasets)
    mine = {n for n in world.datasets if world.organisation[n] == caller.organisation}
    if caller.role is Role.ANALYST:
        return mine & world.granted.get(caller.id, set())
    return mine


CALLERS = (
    "admin",
    "curator a",
    "auditor a",
    "granted analyst a",
    "ungranted analyst a",
    "curator b",
)


@pytest.mark.parametrize("who", CALLERS)
def test_every_reader_sees_what_the_rule_allows(database: Database, world: World, who: str) -> None:
    caller = world.callers[who]
    expected = _expected(world, caller)
    scope, analyst = caller.viewer.scope, caller.viewer.analyst
    name_of = {v: k for k, v in world.datasets.items()}

    uow = UnitOfWork(database)
    with uow.read_only():
        everything = uow.datasets.list(scope=scope, analyst=analyst, limit=10_000, offset=0)
        listed = {name_of[d.id] for d in everything if d.id in name_of}
        read = set()
        for name, dataset_id in world.datasets.items():
            try:
                visible_dataset(uow, caller, dataset_id, lock=False)
                read.add(name)
            except NotFound:
                pass
    assert listed == expected
    assert read == expected

    with uow:
        locked_orm = {
            name
            for name, dataset_id in world.datasets.items()
            if uow.datasets.visible(dataset_id, scope=scope, analyst=analyst, lock=True) is not None
        }
    assert locked_orm == expected

    with uow.core():
        conn = uow.connection()
        one_by_one = {
            name
            for name, dataset_id in world.datasets.items()
            if admission.read_levels(
                conn, dataset_id, scope=scope, analyst=analyst, org_lock="share"
            )
            is not None
        }
        together = admission.read_many_levels(
            conn, sorted(world.datasets.values()), scope=scope, analyst=analyst
        )
    assert one_by_one == expected
    assert {name_of[d] for d in together} == expected
    if analyst is not None:  # an analyst's levels come with its grant
        assert all(levels.grant is not None for levels in together.values())
