"""Who is calling: principals, roles and API-key authentication (SERVICE.md §4).

Keys are bearer tokens. The operator's admin key comes from ``ODOMETER_ADMIN_KEY`` and acts in
every role across organisations; other keys live in ``api_keys`` as SHA-256 digests (tokens
are 256-bit random, so a fast hash is enough; no plaintext is stored).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum

from app.db.models import ApiKey
from app.db.uow import UnitOfWork
from app.services._common import new_id, utc_now
from app.services.errors import Forbidden, Unauthorized

TOKEN_PREFIX = "odo_"
ADMIN_PRINCIPAL_ID = "admin"


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

    def can_see(self, organisation: str) -> bool:
        return self.is_admin or self.organisation == organisation

    def require(self, *roles: Role) -> None:
        """Raise :class:`Forbidden` unless the principal has one of ``roles`` (admin has all)."""
        if not self.is_admin and self.role not in roles:
            wanted = " or ".join(r.value for r in roles)
            raise Forbidden(f"this operation needs the role {wanted}")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def admin_principal(token: str | None, admin_key: str | None) -> Principal | None:
    """The admin, if ``token`` is the configured admin key (constant-time comparison)."""
    if token and admin_key is not None and hmac.compare_digest(
        token.encode("utf-8"), admin_key.encode("utf-8")
    ):
        return Principal(ADMIN_PRINCIPAL_ID, Role.ADMIN, None)
    return None


def authenticate(uow: UnitOfWork, token: str | None, admin_key: str | None) -> Principal:
    """Resolve a bearer token to a principal; missing or unknown tokens raise Unauthorized."""
    if not token:
        raise Unauthorized("missing bearer token (Authorization: Bearer <key>)")
    admin = admin_principal(token, admin_key)
    if admin is not None:
        return admin
    digest = hash_token(token)
    with uow.read_only():
        key = uow.api_keys.by_hash(digest)
        if (
            key is None
            or key.revoked_at is not None
            or not hmac.compare_digest(key.key_hash, digest)
        ):
            raise Unauthorized("invalid API key")
        return Principal(key.principal_id, Role(key.role), key.organisation)


def issue_api_key(uow: UnitOfWork, principal_id: str, role: Role, organisation: str) -> str:
    """Create a key for a principal and return the token (shown once, stored hashed)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with uow:
        uow.api_keys.add(
            ApiKey(
                id=new_id("key"),
                key_hash=hash_token(token),
                principal_id=principal_id,
                role=role.value,
                organisation=organisation,
                created_at=utc_now(),
                revoked_at=None,
            )
        )
        uow.commit()
    return token
