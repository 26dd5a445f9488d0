"""Models and migrations agree (autogenerate finds nothing), on both backends."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.db.engine import make_engine
from app.db.models import Base
from app.db.uow import Database
from tests.support import ROOT, Backend


def test_models_and_migrations_agree(database: Database) -> None:
    with database.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
        assert diff == []
        tables = set(inspect(conn).get_table_names())
    assert tables == {
        "alembic_version",
        "api_keys",
        "datasets",
        "idempotency_keys",
        "invocations",
        "ledger_entries",
    }


def test_downgrade_and_upgrade_round_trip(fresh_backend: Backend) -> None:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", fresh_backend.url)
    cfg.attributes["configure_logging"] = False
    command.downgrade(cfg, "base")
    engine = make_engine(fresh_backend.url, null_pool=True)
    try:
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
        command.upgrade(cfg, "head")
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            assert context.get_current_revision() == "0001"
    finally:
        engine.dispose()
