"""Test helpers shared across the suite: database backends, migrations, API shortcuts."""

from __future__ import annotations

import atexit
import contextlib
import copy
import os
import secrets
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

from app.settings import normalise_database_url

ROOT = Path(__file__).resolve().parent.parent
ADMIN_KEY = "test-admin-key-" + "x" * 16
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


def postgres_url() -> str | None:
    """The PostgreSQL server to test against, if any (a database there is used as the
    maintenance connection; each test session creates its own database)."""
    for var in ("ODOMETER_TEST_POSTGRES_URL", "DATABASE_URL"):
        url = os.environ.get(var, "")
        if url.startswith(("postgresql", "postgres:")):
            return normalise_database_url(url)
    return None


PG_SKIP_REASON = (
    "PostgreSQL backend not configured: set ODOMETER_TEST_POSTGRES_URL "
    "(e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test) or DATABASE_URL"
)


@dataclass(frozen=True)
class Backend:
    name: str
    url: str


def migrate(url: str) -> None:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["configure_logging"] = False
    command.upgrade(cfg, "head")


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


# A migrated database per backend and process, copied by fresh_database instead of migrating
# each new database again (about 100 tests take a fresh database; a migration took 0.3-0.8 s on
# a loaded 2-core machine, a copy a few milliseconds for SQLite, a CREATE DATABASE ... TEMPLATE
# for PostgreSQL). The copies are the migrated schema byte for byte; dropped at the process's
# exit (the SQLite file with its temporary directory).
_TEMPLATES: dict[tuple[str, str], str] = {}
_TEMPLATE_DIR: list[tempfile.TemporaryDirectory[str]] = []


def _sqlite_template() -> str:
    key = ("sqlite", "")
    if key not in _TEMPLATES:
        if not _TEMPLATE_DIR:
            _TEMPLATE_DIR.append(tempfile.TemporaryDirectory(prefix="odometer-template-"))
        path = Path(_TEMPLATE_DIR[0].name) / "template.db"
        migrate(f"sqlite:///{path}")
        _TEMPLATES[key] = str(path)
    return _TEMPLATES[key]


def _postgres_template(base: str) -> str:
    key = ("postgresql", base)
    if key not in _TEMPLATES:
        name = f"odometer_template_{secrets.token_hex(6)}"
        with psycopg.connect(_libpq(base), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        atexit.register(_drop, base, name)
        migrate(make_url(base).set(database=name).render_as_string(hide_password=False))
        with psycopg.connect(_libpq(base), autocommit=True) as conn:
            # nothing connects to it again (a connection to a template stops its copying)
            conn.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
        _TEMPLATES[key] = name
    return _TEMPLATES[key]


def _drop(base: str, name: str) -> None:
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(_libpq(base), autocommit=True) as conn,
    ):
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_database(kind: str, tmp_dir: Path) -> Iterator[Backend]:
    """A new, migrated database of the given backend, dropped (or deleted) afterwards: a copy
    of the process's migrated template."""
    if kind == "sqlite":
        path = tmp_dir / f"odometer_{secrets.token_hex(4)}.db"
        url = f"sqlite:///{path}"
        with (
            contextlib.closing(sqlite3.connect(_sqlite_template())) as source,
            contextlib.closing(sqlite3.connect(path)) as target,
        ):
            source.backup(target)
        yield Backend("sqlite", url)
        return
    base = postgres_url()
    assert base is not None
    template = _postgres_template(base)
    name = f"odometer_test_{secrets.token_hex(6)}"
    with psycopg.connect(_libpq(base), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    try:
        yield Backend("postgresql", url)
    finally:
        with psycopg.connect(_libpq(base), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---------------------------------------------------------------------------- service shortcuts
def service_dataset(uow: Any, name: str, epsilon: str = "1", mode: str = "basic") -> str:
    """A dataset (δ_B = 1e-5, add/remove) created through the service as the admin; its id."""
    from app.services import datasets
    from app.services.principals import Principal, Role

    new = datasets.NewDataset(
        name=name,
        epsilon=epsilon,
        delta="0.00001",
        relation="add_remove",
        accounting={"mode": mode},
    )
    return str(datasets.create_dataset(uow, Principal("admin", Role.ADMIN, None), new)["id"])


# ---------------------------------------------------------------------------- API shortcuts
def basic_dataset(
    client: Any, epsilon: Any = 1, delta: Any = "0.000001", **extra: Any
) -> dict[str, Any]:
    body = {"name": "test", "budget": {"epsilon": epsilon, "delta": delta}, **extra}
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def ledger(client: Any, dataset_id: str) -> list[dict[str, Any]]:
    r = client.get(f"/v1/datasets/{dataset_id}/ledger", params={"limit": 100_000}, headers=AUTH)
    assert r.status_code == 200, r.text
    entries: list[dict[str, Any]] = r.json()["entries"]
    return entries


def status(client: Any, dataset_id: str) -> dict[str, Any]:
    r = client.get(f"/v1/datasets/{dataset_id}", headers=AUTH)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()["status"]
    return out


# ---------------------------------------------------------------------------- tenancy shortcuts
def new_organisation(client: Any, name: str | None = None) -> str:
    """A new organisation (as the admin); returns its id."""
    r = client.post(
        "/v1/organisations", json={"name": name or f"org-{secrets.token_hex(4)}"}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def new_principal(
    client: Any, organisation_id: str | None, role: str, name: str | None = None
) -> tuple[str, dict[str, str]]:
    """A new principal with one key (as the admin): ``(principal id, auth headers)``."""
    body: dict[str, Any] = {"name": name or f"{role}-{secrets.token_hex(3)}", "role": role}
    if organisation_id is not None:
        body["organisation_id"] = organisation_id
    r = client.post("/v1/principals", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    principal_id = str(r.json()["id"])
    k = client.post(f"/v1/principals/{principal_id}/keys", json={}, headers=AUTH)
    assert k.status_code == 201, k.text
    return principal_id, {"Authorization": f"Bearer {k.json()['key']}"}


def grant(
    client: Any, dataset_id: str, principal_id: str, quota: dict[str, Any] | None = None
) -> None:
    body: dict[str, Any] = {"principal_id": principal_id}
    if quota is not None:
        body["quota"] = quota
    r = client.post(f"/v1/datasets/{dataset_id}/grants", json=body, headers=AUTH)
    assert r.status_code == 201, r.text


def rehashed(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` (copied) with the hash chain computed anew over them, as a ledger edited in
    a test (a version relabelled, a part removed) would have been written."""
    from odometer_core.ledger import entry_hash
    from odometer_core.ledger.chain import GENESIS_HASH

    prev = GENESIS_HASH
    out = []
    for entry in copy.deepcopy(entries):
        entry["prev_hash"] = prev
        entry["hash"] = prev = entry_hash(entry)
        out.append(entry)
    return out
