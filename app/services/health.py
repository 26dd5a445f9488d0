"""Readiness: can we reach the database?"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from app.db.uow import Database
from app.services.errors import ServiceError


class DatabaseUnavailable(ServiceError):
    code = "ServiceUnavailable"


def check_database(database: Database) -> None:
    """Raise :class:`DatabaseUnavailable` unless ``SELECT 1`` succeeds."""
    try:
        database.ping()
    except SQLAlchemyError as exc:
        raise DatabaseUnavailable(f"database not reachable: {type(exc).__name__}") from None
