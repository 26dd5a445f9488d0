"""Organisations, principals, grants with quotas, key expiry, organisation caps.

Existing data is carried over: every organisation named by a dataset or a key becomes an
``organisations`` row (plus ``default``), every key's principal a ``principals`` row.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True)
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# As created by revision 0001 (recreated after SQLite's batch copy of ledger_entries).
SQLITE_TRIGGERS = (
    """CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE ON ledger_entries
       BEGIN SELECT RAISE(ABORT, 'ledger_entries is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER ledger_entries_no_delete BEFORE DELETE ON ledger_entries
       BEGIN SELECT RAISE(ABORT, 'ledger_entries is append-only: DELETE refused'); END""",
)
EMPTY_BASIC_STATE = {
    "spent_epsilon": "0",
    "reserved_epsilon": "0",
    "spent_delta": "0",
    "open_reservations": 0,
}


def upgrade() -> None:
    organisations = op.create_table(
        "organisations",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("cap_json", Json, nullable=True),
        sa.Column("cap_state_json", Json, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organisations")),
        sa.UniqueConstraint("name", name=op.f("uq_organisations_name")),
    )
    principals = op.create_table(
        "principals",
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("organisation_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.ForeignKeyConstraint(
            ["organisation_id"],
            ["organisations.id"],
            name=op.f("fk_principals_organisation_id_organisations"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_principals")),
    )
    op.create_index(op.f("ix_principals_organisation_id"), "principals", ["organisation_id"])
    op.create_table(
        "grants",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("dataset_id", sa.String(40), nullable=False),
        sa.Column("principal_id", sa.String(128), nullable=False),
        sa.Column("quota_config_json", Json, nullable=True),
        sa.Column("quota_state_json", Json, nullable=True),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_grants_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["principal_id"], ["principals.id"], name=op.f("fk_grants_principal_id_principals")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grants")),
        sa.UniqueConstraint(
            "dataset_id", "principal_id", name=op.f("uq_grants_dataset_id_principal_id")
        ),
    )
    op.create_index(op.f("ix_grants_principal_id"), "grants", ["principal_id"])
    op.add_column("api_keys", sa.Column("expires_at", sa.String(32), nullable=True))
    op.add_column("invocations", sa.Column("levels", Json, nullable=True))
    op.add_column("ledger_entries", sa.Column("org", Json, nullable=True))
    op.add_column("ledger_entries", sa.Column("quota", Json, nullable=True))

    # Carry existing tenants and key holders over.
    bind = op.get_bind()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    names = {"default"}
    names.update(r[0] for r in bind.execute(sa.text("SELECT DISTINCT organisation FROM datasets")))
    keys = list(
        bind.execute(sa.text("SELECT DISTINCT principal_id, role, organisation FROM api_keys"))
    )
    names.update(r[2] for r in keys)
    if names:
        op.bulk_insert(
            organisations,
            [
                {
                    "id": n,
                    "name": n,
                    "cap_json": None,
                    "cap_state_json": EMPTY_BASIC_STATE,
                    "created_at": now,
                    "updated_at": now,
                }
                for n in sorted(names)
            ],
        )
    seen: set[str] = set()
    rows = []
    for principal_id, role, organisation in keys:
        if principal_id in seen:
            continue
        seen.add(principal_id)
        rows.append(
            {
                "id": principal_id,
                "name": principal_id,
                "role": role,
                "organisation_id": None if role == "admin" else organisation,
                "created_at": now,
            }
        )
    if rows:
        op.bulk_insert(principals, rows)


def downgrade() -> None:
    # SQLite cannot drop columns in place: batch mode copies the tables (the ledger's
    # triggers are recreated by hand because the copy drops them).
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        op.execute("DROP TRIGGER IF EXISTS ledger_entries_no_update")
        op.execute("DROP TRIGGER IF EXISTS ledger_entries_no_delete")
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("quota")
        batch.drop_column("org")
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("levels")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("expires_at")
    if sqlite:
        for statement in SQLITE_TRIGGERS:
            op.execute(statement)
    op.drop_index(op.f("ix_grants_principal_id"), table_name="grants")
    op.drop_table("grants")
    op.drop_index(op.f("ix_principals_organisation_id"), table_name="principals")
    op.drop_table("principals")
    op.drop_table("organisations")
