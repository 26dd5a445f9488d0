"""Initial schema: datasets, append-only ledger, invocations, idempotency keys, API keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True)
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# The ledger is append-only *in the database*: UPDATE and DELETE abort.
SQLITE_TRIGGERS = (
    """CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE ON ledger_entries
       BEGIN SELECT RAISE(ABORT, 'ledger_entries is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER ledger_entries_no_delete BEFORE DELETE ON ledger_entries
       BEGIN SELECT RAISE(ABORT, 'ledger_entries is append-only: DELETE refused'); END""",
)
POSTGRES_TRIGGERS = (
    """CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION 'ledger_entries is append-only: % refused', TG_OP
           USING ERRCODE = 'restrict_violation';
       END $$""",
    """CREATE TRIGGER ledger_entries_no_update_delete BEFORE UPDATE OR DELETE ON ledger_entries
       FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only()""",
    """CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_append_only()""",
)


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("organisation", sa.String(64), nullable=False),
        sa.Column("relation", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("config_json", Json, nullable=False),
        sa.Column("state_json", Json, nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
    )
    op.create_index(op.f("ix_datasets_organisation"), "datasets", ["organisation"])

    op.create_table(
        "ledger_entries",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("dataset_id", sa.String(40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("invocation_id", sa.String(40), nullable=True),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
        sa.Column("accounting_version", sa.String(32), nullable=False),
        sa.Column("declaration", Json, nullable=True),
        sa.Column("request", Json, nullable=True),
        sa.Column("charge", Json, nullable=True),
        sa.Column("requested", Json, nullable=True),
        sa.Column("refund", Json, nullable=True),
        sa.Column("reservation", Json, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("config", Json, nullable=True),
        sa.Column("state", Json, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_ledger_entries_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_entries")),
        sa.UniqueConstraint("dataset_id", "seq", name=op.f("uq_ledger_entries_dataset_id_seq")),
    )
    op.create_index(op.f("ix_ledger_entries_invocation_id"), "ledger_entries", ["invocation_id"])

    op.create_table(
        "invocations",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("dataset_id", sa.String(40), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("ledger", sa.String(64), nullable=True),
        sa.Column("declaration", Json, nullable=False),
        sa.Column("request", Json, nullable=False),
        sa.Column("charge", Json, nullable=False),
        sa.Column("requested", Json, nullable=False),
        sa.Column("refund", Json, nullable=True),
        sa.Column("reservation", Json, nullable=True),
        sa.Column("cell", sa.String(64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_invocations_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_invocations")),
    )
    op.create_index(op.f("ix_invocations_dataset_id"), "invocations", ["dataset_id"])

    op.create_table(
        "idempotency_keys",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("principal_id", sa.String(128), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("dataset_id", sa.String(40), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("response_body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_idempotency_keys_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        sa.UniqueConstraint(
            "principal_id", "key", name=op.f("uq_idempotency_keys_principal_id_key")
        ),
    )

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("principal_id", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("organisation", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("revoked_at", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )

    triggers = SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else POSTGRES_TRIGGERS
    for statement in triggers:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS ledger_entries_no_update")
        op.execute("DROP TRIGGER IF EXISTS ledger_entries_no_delete")
    else:
        op.execute("DROP TRIGGER IF EXISTS ledger_entries_no_truncate ON ledger_entries")
        op.execute("DROP TRIGGER IF EXISTS ledger_entries_no_update_delete ON ledger_entries")
        op.execute("DROP FUNCTION IF EXISTS ledger_entries_append_only()")
    op.drop_table("api_keys")
    op.drop_table("idempotency_keys")
    op.drop_index(op.f("ix_invocations_dataset_id"), table_name="invocations")
    op.drop_table("invocations")
    op.drop_index(op.f("ix_ledger_entries_invocation_id"), table_name="ledger_entries")
    op.drop_table("ledger_entries")
    op.drop_index(op.f("ix_datasets_organisation"), table_name="datasets")
    op.drop_table("datasets")
