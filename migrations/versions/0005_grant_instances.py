"""Grants told apart: a reservation ends at the quota that made it, not at a later grant's.

A revoked grant's row is deleted and a new grant of the same analyst is a new row (which SQLite
may give the same ``id``), so nothing told a reservation made under the first grant from one
made under the second: settle and cancel went to the quota in force, which had reserved
nothing (409 ``NoOpenReservation``, the reservation kept at the dataset for ever).

- ``grants.granted_seq``: the ``seq`` of the ``grant_changed`` ledger entry that made the
  grant, unique in the dataset's ledger. Existing grants get it from their ledger (the latest
  entry granting that analyst; ``0`` if there is none, which the service never wrote).
- ``invocations.levels.quota_grant``: the grant whose quota holds an invocation. Existing open
  reservations held at a quota get it from the ledger too: the latest entry granting the
  analyst before the reservation's own entry (the grant in force when it reserved). Closed
  invocations are left as they are (nothing finishes them again).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True)

GRANTS = sa.table(
    "grants",
    sa.column("id"),
    sa.column("dataset_id"),
    sa.column("principal_id"),
    sa.column("granted_seq"),
)
LEDGER = sa.table(
    "ledger_entries",
    sa.column("dataset_id"),
    sa.column("seq"),
    sa.column("kind"),
    sa.column("invocation_id"),
    sa.column("request", Json),
)
INVOCATIONS = sa.table(
    "invocations",
    sa.column("id"),
    sa.column("dataset_id"),
    sa.column("status"),
    sa.column("levels", Json),
)


class _Grants:
    """Per dataset, the ``(seq, analyst)`` of its ledger's entries granting an analyst, read
    once per dataset."""

    def __init__(self, bind: sa.Connection) -> None:
        self.bind = bind
        self.known: dict[str, list[tuple[int, str]]] = {}

    def of(self, dataset_id: str) -> list[tuple[int, str]]:
        if dataset_id not in self.known:
            query = (
                sa.select(LEDGER.c.seq, LEDGER.c.request)
                .where(LEDGER.c.dataset_id == dataset_id, LEDGER.c.kind == "grant_changed")
                .order_by(LEDGER.c.seq)
            )
            self.known[dataset_id] = [
                (int(seq), str(request["principal_id"]))
                for seq, request in self.bind.execute(query).all()
                if isinstance(request, dict) and request.get("granted") is True
            ]
        return self.known[dataset_id]

    def latest(self, dataset_id: str, analyst: str, before: int | None = None) -> int | None:
        """The seq of the latest entry granting ``analyst`` (before ``before``, if given)."""
        seqs = [
            seq
            for seq, who in self.of(dataset_id)
            if who == analyst and (before is None or seq < before)
        ]
        return max(seqs) if seqs else None


def upgrade() -> None:
    op.add_column("grants", sa.Column("granted_seq", sa.Integer(), nullable=True))
    bind = op.get_bind()
    history = _Grants(bind)
    rows = bind.execute(sa.select(GRANTS.c.id, GRANTS.c.dataset_id, GRANTS.c.principal_id)).all()
    for grant_id, dataset_id, analyst in rows:
        seq = history.latest(dataset_id, analyst)
        bind.execute(GRANTS.update().where(GRANTS.c.id == grant_id).values(granted_seq=seq or 0))
    with op.batch_alter_table("grants") as batch:
        batch.alter_column("granted_seq", existing_type=sa.Integer(), nullable=False)

    reserved = sa.select(INVOCATIONS.c.id, INVOCATIONS.c.dataset_id, INVOCATIONS.c.levels).where(
        INVOCATIONS.c.status == "reserved"
    )
    for inv_id, dataset_id, levels in bind.execute(reserved).all():
        analyst = (levels or {}).get("quota")
        if analyst is None or "quota_grant" in levels:
            continue
        at = bind.execute(
            sa.select(LEDGER.c.seq).where(
                LEDGER.c.dataset_id == dataset_id,
                LEDGER.c.invocation_id == inv_id,
                LEDGER.c.kind == "invocation_reserved",
            )
        ).scalar()
        seq = None if at is None else history.latest(dataset_id, analyst, before=int(at))
        if seq is not None:
            _set_levels(bind, inv_id, {**levels, "quota_grant": seq})


def _set_levels(bind: sa.Connection, inv_id: str, levels: dict[str, Any]) -> None:
    bind.execute(INVOCATIONS.update().where(INVOCATIONS.c.id == inv_id).values(levels=levels))


def downgrade() -> None:
    bind = op.get_bind()
    for inv_id, levels in bind.execute(sa.select(INVOCATIONS.c.id, INVOCATIONS.c.levels)).all():
        if isinstance(levels, dict) and "quota_grant" in levels:
            _set_levels(bind, inv_id, {k: v for k, v in levels.items() if k != "quota_grant"})
    with op.batch_alter_table("grants") as batch:
        batch.drop_column("granted_seq")
