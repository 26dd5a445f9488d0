"""FastAPI dependencies, as ``Annotated`` aliases (one place)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final

from fastapi import Depends, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BeforeValidator

from app.api.middleware import Metrics
from app.db.uow import Database, UnitOfWork
from app.services.batching import Registrar
from app.services.charging import ChargeWorkers
from app.services.principals import Principal, Role, admin_principal, authenticate
from app.settings import Settings

#: ASCII digits; a ``-`` only on a nonzero number, which the parameter's bounds then refuse
#: naming them (``-0`` would be read as 0).
_DIGITS: Final = re.compile(r"\+?[0-9]{1,30}|-0*[1-9][0-9]{0,29}")


def _query_integer(value: object) -> object:
    if isinstance(value, str) and _DIGITS.fullmatch(value) is None:
        raise ValueError(
            f"must be an integer in ASCII digits (no sign but +, no spaces), got {value[:64]!r}"
        )
    return value


#: An integer query parameter is ASCII digits, as a JSON body's integer text is
#: (docs/http-api.md, *Numbers*): pydantic alone reads ``1_0`` as 10, `` 5`` and ``-0``.
#: Written ``Annotated[int, Query(ge=…, le=…), QUERY_INTEGER]``.
QUERY_INTEGER = BeforeValidator(_query_integer)


def _state(name: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency handing the routes ``app.state.<name>``, one of the long-lived objects
    ``create_app`` made (the composition root)."""

    async def dependency(request: Request) -> Any:
        return getattr(request.app.state, name)

    dependency.__name__ = f"get_{name}"
    return dependency


get_settings = _state("settings")
get_database = _state("database")
get_metrics = _state("metrics")
get_charges = _state("charges")
get_registrar = _state("registrar")

SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
ChargesDep = Annotated[ChargeWorkers, Depends(get_charges)]
RegistrarDep = Annotated[Registrar, Depends(get_registrar)]


async def get_uow(database: DatabaseDep) -> UnitOfWork:
    """A fresh, unopened unit of work; the service opens and commits it."""
    return UnitOfWork(database)


UowDep = Annotated[UnitOfWork, Depends(get_uow)]

#: the bearer scheme of every route (its OpenAPI security scheme, and the credentials' parser)
bearer = HTTPBearer(auto_error=False, description="API key: `Authorization: Bearer <key>`")


async def principal_of(
    credentials: HTTPAuthorizationCredentials | None, database: Database, settings: Settings
) -> Principal:
    """The caller, from its bearer credentials (401 when missing or unknown): the one
    authentication of every route. The admin key is checked in memory; other keys need a
    database read (in a thread)."""
    admin_key = settings.admin_key.get_secret_value() if settings.admin_key else None
    token = credentials.credentials if credentials else None
    admin = admin_principal(token, admin_key)
    if admin is not None:
        return admin
    return await run_in_threadpool(authenticate, UnitOfWork(database), token, admin_key)


async def get_principal(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    database: DatabaseDep,
    settings: SettingsDep,
) -> Principal:
    return await principal_of(credentials, database, settings)


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def require_role(*roles: Role) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency admitting principals with one of ``roles`` (the admin has every role)."""

    async def dependency(principal: PrincipalDep) -> Principal:
        principal.require(*roles)
        return principal

    return dependency


AdminDep = Annotated[Principal, Depends(require_role(Role.ADMIN))]
CuratorDep = Annotated[Principal, Depends(require_role(Role.CURATOR))]
GrantReaderDep = Annotated[Principal, Depends(require_role(Role.CURATOR, Role.AUDITOR))]
AnalystDep = Annotated[Principal, Depends(require_role(Role.ANALYST))]
AuditorDep = Annotated[Principal, Depends(require_role(Role.AUDITOR))]
#: Reports and ledgers: auditors, and curators of the dataset's organisation (visibility is the
#: service's check: another organisation's dataset is 404 for either).
ReportReaderDep = Annotated[Principal, Depends(require_role(Role.CURATOR, Role.AUDITOR))]
InvocationReaderDep = Annotated[Principal, Depends(require_role(Role.ANALYST, Role.AUDITOR))]
ReaderDep = PrincipalDep

#: The Idempotency-Key rule of every route that takes one: the header, what it admits, what the
#: OpenAPI document says of it (the register route checks it with the same declaration:
#: :data:`app.api.register.IDEMPOTENCY_KEY`).
IdempotencyKeyDep = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[\x21-\x7e]+$",
        description="Retry-safe key (Stripe semantics): the same key and request return the "
        "stored response; the same key with another request is 422",
    ),
]
