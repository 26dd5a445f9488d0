"""No issued API key is recoverable from the database: a dump holds no plaintext token (nor
its secret part), only digests. SQLite: the database file, its WAL and shared-memory files,
byte for byte. PostgreSQL: ``pg_dump`` when it is installed and works, else every column of
every table read as text."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, make_url, text

from app import cli
from app.db.uow import Database, UnitOfWork
from app.main import create_app
from app.services.principals import Role, hash_token, issue_api_key
from app.settings import Settings, get_settings
from tests.support import ADMIN_KEY, AUTH, Backend, grant


def _issue_keys(client: TestClient, uow: UnitOfWork, backend: Backend) -> list[str]:
    """Keys through every path: the API, ``create-key``'s service, ``bootstrap-admin``."""
    org = client.post("/v1/organisations", json={"name": "keys"}, headers=AUTH).json()["id"]
    tokens = []
    for role in ("curator", "analyst", "auditor", "analyst"):
        r = client.post(
            "/v1/principals",
            json={"name": role, "role": role, "organisation_id": org},
            headers=AUTH,
        )
        pid = r.json()["id"]
        for body in ({}, {"expires_at": "2999-01-01T00:00:00Z"}):
            k = client.post(f"/v1/principals/{pid}/keys", json=body, headers=AUTH)
            assert k.status_code == 201, k.text
            tokens.append(k.json()["key"])
    tokens.append(issue_api_key(uow, "operator-made", Role.ANALYST, org))
    return tokens


def _use_keys(client: TestClient, tokens: list[str]) -> None:
    """Authenticate with every key (reads must not write tokens anywhere) and revoke one."""
    for token in tokens:
        r = client.get("/v1/datasets", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
    curator = {"Authorization": f"Bearer {tokens[0]}"}
    ds = client.post(
        "/v1/datasets", json={"name": "k", "budget": {"epsilon": 1, "delta": 0}}, headers=curator
    ).json()["id"]
    analyst_id = client.get("/v1/principals", headers=curator).json()["principals"][1]["id"]
    grant(client, ds, analyst_id)
    r = client.post(
        f"/v1/datasets/{ds}/invocations",
        json={"mechanism": {"type": "pure_dp", "epsilon": "0.1"}},
        headers={"Authorization": f"Bearer {tokens[2]}", "Idempotency-Key": "k-1"},
    )
    assert r.status_code == 201, r.text
    key_id = "key_" + tokens[3].removeprefix("odo_key_")[:32]
    assert client.delete(f"/v1/keys/{key_id}", headers=AUTH).status_code == 200


def _dump(backend: Backend, database: Database) -> bytes:
    if backend.name == "sqlite":
        path = Path(str(make_url(backend.url).database))
        files = [p for p in path.parent.iterdir() if p.name.startswith(path.name)]
        assert path in files
        return b"".join(p.read_bytes() for p in files)
    pg_dump = shutil.which("pg_dump")
    if pg_dump is not None:
        url = make_url(backend.url).set(drivername="postgresql")
        done = subprocess.run(
            [pg_dump, "--data-only", url.render_as_string(hide_password=False)],
            capture_output=True,
            check=False,
            timeout=60,
        )
        if done.returncode == 0:
            return done.stdout
    # pg_dump missing or of another major version: every column of every table as text.
    chunks: list[bytes] = []
    with database.engine.connect() as conn:
        inspector = inspect(conn)
        for table in inspector.get_table_names():
            for column in inspector.get_columns(table):
                rows = conn.execute(text(f'SELECT CAST("{column["name"]}" AS TEXT) FROM "{table}"'))
                chunks.extend((v or "").encode() for (v,) in rows)
    return b"\n".join(chunks)


def test_a_dump_holds_no_plaintext_key(
    fresh_backend: Backend,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    database = Database.from_settings(Settings(database_url=fresh_backend.url))
    try:
        settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
        with TestClient(create_app(settings, database)) as client:
            tokens = _issue_keys(client, UnitOfWork(database), fresh_backend)
            monkeypatch.setenv("DATABASE_URL", fresh_backend.url)
            get_settings.cache_clear()
            try:
                # --force: the database may hold an admin already (bootstrap-admin refuses a second)
                assert cli.main(["bootstrap-admin", "--name", "root", "--force"]) == 0
            finally:
                get_settings.cache_clear()
            tokens.append(capsys.readouterr().out.strip())
            _use_keys(client, tokens)
        dump = _dump(fresh_backend, database)
    finally:
        database.dispose()
    assert len(tokens) == 10 and len(set(tokens)) == 10
    for token in tokens:
        secret = token[41:] if token.startswith("odo_key_") else token[4:]
        assert len(secret) >= 40
        assert token.encode() not in dump
        assert secret.encode() not in dump
        assert ADMIN_KEY.encode() not in dump
        # the scan sees the keys table: the digest of every key is there
        assert hash_token(token).encode() in dump
