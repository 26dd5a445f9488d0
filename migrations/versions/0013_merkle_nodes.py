"""Stored subtree roots of each dataset's Merkle tree (``docs/ledger.md``, *Merkle tree*).

- ``merkle_nodes``: the root of every complete perfect subtree of a dataset's tree at least
  ``app.services.proofs.STORED_HEIGHT`` (8) levels high, ``(dataset_id, level, idx, hash)``:
  about one row per 128 entries. A proof reads ``O(log n)`` of them and at most two runs of
  256 entries' hashes (``app.services.proofs``), instead of every entry.

The upgrade builds the rows of every existing ledger from its entries' hashes, read in ``seq``
order in one streamed query (as revision 0012 did for the frontiers): 10^6 entries in about
8 s on PostgreSQL on a loaded two-core development machine (``benchmarks/RESULTS.md``, *Proofs
at 10^6 entries*). Rows a ledger grows afterwards are caught up by the first proof or signed
head that needs them (``app.services.proofs.catch_up``). The downgrade drops the table:
nothing else reads it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from odometer_core.ledger.merkle import Frontier, completed_subtrees, entry_leaf_hash

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: ``app.services.proofs.STORED_HEIGHT`` when this revision was written (a revision does not
#: import the application: it must build what it built then)
HEIGHT = 8
ENTRIES = sa.table("ledger_entries", sa.column("dataset_id"), sa.column("seq"), sa.column("hash"))


def upgrade() -> None:
    nodes = op.create_table(
        "merkle_nodes",
        sa.Column("dataset_id", sa.String(40), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_merkle_nodes_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("dataset_id", "level", "idx", name=op.f("pk_merkle_nodes")),
    )
    assert nodes is not None
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(ENTRIES.c.dataset_id, ENTRIES.c.seq, ENTRIES.c.hash)
        .order_by(ENTRIES.c.dataset_id, ENTRIES.c.seq)
        .execution_options(yield_per=10_000)
    )
    frontier, dataset = Frontier(), None
    leaves: list[bytes] = []
    pending: list[dict[str, object]] = []

    def flush(dataset_id: str | None, final: bool) -> None:
        if dataset_id is not None and leaves:
            pending.extend(
                {"dataset_id": dataset_id, "level": level, "idx": idx, "hash": value}
                for level, idx, value in completed_subtrees(frontier, leaves, HEIGHT)
            )
            leaves.clear()
        if pending and (final or len(pending) >= 5_000):
            bind.execute(nodes.insert(), pending)
            pending.clear()

    for dataset_id, seq, entry_hash in rows:
        if dataset_id != dataset:
            flush(dataset, True)
            frontier, dataset = Frontier(), dataset_id
        if seq != frontier.size + len(leaves) + 1:
            raise RuntimeError(
                f"dataset {dataset_id}'s ledger has entry {seq} after "
                f"{frontier.size + len(leaves)}: a ledger with a gap has no tree"
            )
        leaves.append(entry_leaf_hash(entry_hash))
        if len(leaves) >= 10_000:
            flush(dataset, False)
    flush(dataset, True)


def downgrade() -> None:
    op.drop_table("merkle_nodes")
