"""Alembic environment: runs migrations with the service's own engine set-up (SQLite pragmas
and explicit BEGIN, psycopg 3 for PostgreSQL)."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.db.engine import make_engine
from app.db.models import Base, compared
from app.settings import get_settings, normalise_database_url

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return normalise_database_url(
        config.get_main_option("sqlalchemy.url") or get_settings().database_url
    )


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        # Our SQLite engine issues an explicit BEGIN, so DDL is transactional there too.
        transactional_ddl=True,
        compare_type=True,
        include_object=compared,
    )


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


#: Several replicas may start at once against one PostgreSQL: the first migrates, the others
#: wait on this advisory lock and then find the schema at head. (SQLite: BEGIN IMMEDIATE.)
MIGRATION_LOCK = 7_262_018


def _run(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url(), null_pool=True)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
