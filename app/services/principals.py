"""Who is calling: principals, roles and API-key authentication.

Keys are bearer tokens ``odo_<key id>_<secret>`` (the secret is 256 random bits). Only the
SHA-256 of the whole token is stored (a fast hash is enough for 256-bit secrets; nothing
stored lets anyone recover a token). Authentication looks the key up by its public id and
compares digests in constant time; revoked and expired keys are 401. The operator's admin key
from ``ODOMETER_ADMIN_KEY`` is checked in memory and acts in every role across organisations.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypedDict

from app.db import models
from app.db.models import ApiKey
from app.db.uow import UnitOfWork
from app.services._common import new_id, utc_now
from app.services._levels import new_organisation_row
from app.services.errors import AlreadyExists, Forbidden, NotFound, Unauthorized
from app.writepath.locking import Viewer

TOKEN_PREFIX = "odo_"
ADMIN_PRINCIPAL_ID = "admin"
_TOKEN = re.compile(r"^odo_(key_[0-9a-f]{32})_[A-Za-z0-9_-]{43}$")


class Role(StrEnum):
    ADMIN = "admin"
    CURATOR = "curator"
    ANALYST = "analyst"
    AUDITOR = "auditor"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. ``organisation`` is ``None`` only for the admin (all)."""

    id: str
    role: Role
    organisation: str | None

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def can_see(self, organisation: str | None) -> bool:
        return self.is_admin or (organisation is not None and self.organisation == organisation)

    def require(self, *roles: Role) -> None:
        """Raise :class:`Forbidden` unless the principal has one of ``roles`` (admin has all)."""
        if not self.is_admin and self.role not in roles:
            wanted = " or ".join(r.value for r in roles)
            raise Forbidden(f"this operation needs the role {wanted}")

    def sees_invocation_of(self, actor: str) -> bool:
        """Whether this caller may see an invocation registered by ``actor``: analysts see only
        their own (others' are 404, like missing ones), the other roles every one of a dataset
        they may see."""
        return self.role is not Role.ANALYST or actor == self.id

    @property
    def viewer(self) -> Viewer:
        """What this caller may see, as the write path's lock statements ask it: every
        organisation (the admin) or its own; of those, only the datasets it holds a grant on
        (an analyst)."""
        scope = None if self.is_admin else self.organisation
        return Viewer(self.id, scope, self.id if self.role is Role.ANALYST else None)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def admin_principal(token: str | None, admin_key: str | None) -> Principal | None:
    """The admin, if ``token`` is the configured admin key (constant-time comparison)."""
    if (
        token
        and admin_key is not None
        and hmac.compare_digest(token.encode("utf-8"), admin_key.encode("utf-8"))
    ):
        return Principal(ADMIN_PRINCIPAL_ID, Role.ADMIN, None)
    return None


def authenticate(uow: UnitOfWork, token: str | None, admin_key: str | None) -> Principal:
    """Resolve a bearer token to a principal; missing, unknown, revoked or expired → 401."""
    if not token:
        raise Unauthorized("missing bearer token (Authorization: Bearer <key>)")
    admin = admin_principal(token, admin_key)
    if admin is not None:
        return admin
    digest = hash_token(token)
    match = _TOKEN.match(token)
    with uow.read_only():
        # Keys issued before 0002 have no id in the token: found by digest (unique index).
        key = uow.api_keys.get(match.group(1)) if match else uow.api_keys.by_hash(digest)
        if key is None or not hmac.compare_digest(key.key_hash, digest):
            raise Unauthorized("invalid API key")
        if key.revoked_at is not None:
            raise Unauthorized("this API key was revoked")
        if key.expires_at is not None and key.expires_at <= utc_now():
            raise Unauthorized("this API key has expired")
        return Principal(key.principal_id, Role(key.role), key.organisation or None)


def _new_token() -> tuple[str, str]:
    key_id = new_id("key")
    return key_id, f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def _add_key(uow: UnitOfWork, row: models.Principal, expires_at: str | None) -> tuple[str, str]:
    key_id, token = _new_token()
    uow.api_keys.add(
        ApiKey(
            id=key_id,
            key_hash=hash_token(token),
            principal_id=row.id,
            role=row.role,
            organisation=row.organisation_id or "",
            created_at=utc_now(),
            revoked_at=None,
            expires_at=expires_at,
        )
    )
    return key_id, token


def _ensure_organisation(uow: UnitOfWork, organisation: str) -> None:
    if uow.organisations.get(organisation) is None:
        # The id is the operator's; the name must be unique too.
        name = organisation
        if uow.organisations.by_name(name) is not None:
            name = f"{organisation} ({secrets.token_hex(3)})"
        uow.organisations.add(new_organisation_row(organisation, name))
        uow.session.flush()


def issue_api_key(uow: UnitOfWork, principal_id: str, role: Role, organisation: str) -> str:
    """Create a key for a principal (created with the organisation of id ``organisation`` when
    missing) and return the token (shown once, stored hashed). Seeds test and benchmark
    databases; the operator's ``odometer create-key`` is :func:`operator_key`, which never
    creates an organisation it was not asked to."""
    with uow:
        row = uow.principals.get(principal_id)
        if row is None:
            org = None if role is Role.ADMIN else organisation
            if org is not None:
                _ensure_organisation(uow, org)
            row = _new_principal(uow, principal_id, role, org)
        _, token = _add_key(uow, row, None)
        uow.commit()
    return token


def _new_principal(
    uow: UnitOfWork, principal_id: str, role: Role, organisation_id: str | None
) -> models.Principal:
    row = models.Principal(
        id=principal_id,
        name=principal_id,
        role=role.value,
        organisation_id=organisation_id,
        created_at=utc_now(),
    )
    uow.principals.add(row)
    uow.session.flush()
    return row


def operator_key(
    uow: UnitOfWork,
    principal_id: str,
    role: Role,
    organisation: str | None,
    *,
    create_organisation: bool = False,
) -> tuple[str | None, str]:
    """``odometer create-key``: a key for a principal, created when missing; ``(organisation
    id, token)``. Nothing is guessed: the organisation is named by id or exact name (unknown:
    ``NotFound``, unless ``create_organisation`` asks for it by that name), and an existing
    principal keeps its role and organisation (another one asked for: ``Forbidden``)."""
    with uow:
        row = uow.principals.get(principal_id)
        if row is not None:
            if row.role != role.value:
                raise Forbidden(
                    f"principal '{principal_id}' is a {row.role}; a {role.value} key is refused "
                    "(a principal's role never changes: create another principal)"
                )
            if organisation is not None and _organisation_id(uow, organisation) != (
                row.organisation_id
            ):
                raise Forbidden(
                    f"principal '{principal_id}' belongs to organisation "
                    f"'{row.organisation_id}', not '{organisation}'"
                )
        else:
            org = None
            if role is not Role.ADMIN:
                org = _organisation_id(uow, organisation or "default", create=create_organisation)
            row = _new_principal(uow, principal_id, role, org)
        _, token = _add_key(uow, row, None)
        uow.commit()
    return row.organisation_id, token


def _organisation_id(uow: UnitOfWork, ref: str, *, create: bool = False) -> str:
    """The organisation named ``ref``, by id first, then by exact (unique) name."""
    found = uow.organisations.get(ref) or uow.organisations.by_name(ref)
    if found is not None:
        return found.id
    if not create:
        raise NotFound(
            f"no organisation '{ref}' (by id or name); create it with "
            "--create-organisation or POST /v1/organisations"
        )
    row = new_organisation_row(new_id("org"), ref)
    uow.organisations.add(row)
    uow.session.flush()
    return row.id


def bootstrap_admin(uow: UnitOfWork, name: str, *, force: bool = False) -> tuple[str, str]:
    """Create an admin principal and its first key: ``(principal id, token)``. Refused when an
    admin principal exists, unless ``force``: the command must not mint admins on re-runs."""
    with uow:
        admins = uow.principals.with_role(Role.ADMIN.value)
        if admins and not force:
            raise AlreadyExists(
                f"an admin principal exists already ({admins[0].id}); use --force to create another"
            )
        row = models.Principal(
            id=new_id("prn"),
            name=name,
            role=Role.ADMIN.value,
            organisation_id=None,
            created_at=utc_now(),
        )
        uow.principals.add(row)
        uow.session.flush()
        _, token = _add_key(uow, row, None)
        uow.commit()
    return row.id, token


# ---------------------------------------------------------------------------- management
class PrincipalView(TypedDict):
    """A principal as the management routes show it (``PrincipalOut``)."""

    id: str
    name: str
    role: str
    organisation_id: str | None
    created_at: str


class PrincipalList(TypedDict):
    principals: list[PrincipalView]


class KeyCreatedView(TypedDict):
    """A key just issued: its token is in this answer only (``KeyCreated``)."""

    id: str
    key: str
    principal_id: str
    expires_at: str | None


class KeyRevokedView(TypedDict):
    """A key revoked (``KeyRevoked``)."""

    id: str
    principal_id: str
    revoked_at: str | None
    expires_at: str | None


def principal_view(row: models.Principal) -> PrincipalView:
    return {
        "id": row.id,
        "name": row.name,
        "role": row.role,
        "organisation_id": row.organisation_id,
        "created_at": row.created_at,
    }


def create_principal(
    uow: UnitOfWork, caller: Principal, name: str, role: Role, organisation_id: str | None
) -> PrincipalView:
    """Admin: any role in any organisation; curator: analysts and auditors of its own."""
    caller.require(Role.CURATOR)
    if not caller.is_admin and role not in (Role.ANALYST, Role.AUDITOR):
        raise Forbidden("curators may create analysts and auditors only")
    if role is Role.ADMIN:
        organisation_id = None
    elif organisation_id is None:
        if caller.organisation is None:
            raise NotFound("organisation_id is required")
        organisation_id = caller.organisation
    with uow:
        if organisation_id is not None and (
            not caller.can_see(organisation_id) or uow.organisations.get(organisation_id) is None
        ):
            raise NotFound(f"organisation '{organisation_id}' not found")
        row = models.Principal(
            id=new_id("prn"),
            name=name,
            role=role.value,
            organisation_id=organisation_id,
            created_at=utc_now(),
        )
        uow.principals.add(row)
        view = principal_view(row)
        uow.commit()
    return view


def list_principals(uow: UnitOfWork, caller: Principal) -> PrincipalList:
    """Principals of the caller's organisation (the admin: all)."""
    with uow.read_only():
        rows = uow.principals.list(None if caller.is_admin else caller.organisation)
        return {"principals": [principal_view(r) for r in rows]}


def _may_manage(caller: Principal, target: models.Principal) -> bool:
    """Admin: everyone; a curator: analysts and auditors of its organisation."""
    return caller.is_admin or (
        caller.role is Role.CURATOR
        and target.organisation_id == caller.organisation
        and target.role in (Role.ANALYST.value, Role.AUDITOR.value)
    )


def create_key(
    uow: UnitOfWork, caller: Principal, principal_id: str, expires_at: datetime | None
) -> KeyCreatedView:
    """Issue a key (the token is in this response only). Admin: any principal; curator: the
    analysts and auditors of its organisation. Nobody mints keys for itself (a stolen key
    must not be able to outlive its revocation)."""
    caller.require(Role.CURATOR)
    expires = None
    if expires_at is not None:
        if expires_at.tzinfo is None:
            expires_at = expires_at.replace(tzinfo=UTC)
        expires = expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with uow:
        target = uow.principals.get(principal_id)
        if target is None or not caller.can_see(target.organisation_id):
            raise NotFound(f"principal '{principal_id}' not found")
        if not _may_manage(caller, target):
            raise Forbidden("curators issue keys for analysts and auditors of their organisation")
        key_id, token = _add_key(uow, target, expires)
        uow.commit()
    return {"id": key_id, "key": token, "principal_id": target.id, "expires_at": expires}


def revoke_key(uow: UnitOfWork, caller: Principal, key_id: str) -> KeyRevokedView:
    """Revoke a key: its owner, a curator of the owner's organisation, or the admin."""
    with uow:
        key = uow.api_keys.get(key_id)
        if key is None or not (caller.is_admin or key.organisation == caller.organisation):
            raise NotFound(f"key '{key_id}' not found")
        owner = uow.principals.get(key.principal_id)
        allowed = (
            key.principal_id == caller.id
            or caller.is_admin
            or (
                caller.role is Role.CURATOR and owner is not None and owner.role != Role.ADMIN.value
            )
        )
        if not allowed:
            raise Forbidden("only the key's owner, its organisation's curator or an admin")
        if key.revoked_at is None:
            key.revoked_at = utc_now()
        view: KeyRevokedView = {
            "id": key.id,
            "principal_id": key.principal_id,
            "revoked_at": key.revoked_at,
            "expires_at": key.expires_at,
        }
        uow.commit()
    return view
