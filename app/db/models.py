"""SQLAlchemy 2.0 typed models.

``datasets`` holds each budget aggregate's current configuration and filter state (the O(1)
state admission works on), its last ledger ``seq`` and the chain head. ``ledger_entries`` is the
append-only history (UPDATE and DELETE are refused by triggers created in the migration).
Times are fixed-width UTC ISO strings (``2026-01-02T03:04:05.123456Z``): the ledger hashes the
exact text, and fixed width makes string order equal time order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from odometer_core.accounting.json_types import (
    AmountJSON,
    ClosedPhaseJSON,
    ConfigJSON,
    DeclarationJSON,
    GrantQuota,
    LevelPart,
    PartitionJSON,
    StateJSON,
)
from odometer_core.ledger.chain import PAYLOAD_FIELDS

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: SQL NULL for Python ``None`` (not the JSON text ``null``).
Json = JSON(none_as_null=True)
#: 64-bit ids on PostgreSQL; SQLite needs INTEGER PRIMARY KEY for its rowid autoincrement.
BigId = BigInteger().with_variant(Integer(), "sqlite")

ID_LENGTH = 40
TIME_LENGTH = 32
ACTOR_LENGTH = 128


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: Json}


class Dataset(Base):
    """A budget aggregate: one privacy filter and the head of its ledger."""

    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    organisation: Mapped[str] = mapped_column(String(64), index=True)
    relation: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))
    config_json: Mapped[ConfigJSON] = mapped_column(Json)
    state_json: Mapped[StateJSON] = mapped_column(Json)
    last_seq: Mapped[int] = mapped_column(Integer)
    head_hash: Mapped[str] = mapped_column(String(64))
    created_by: Mapped[str] = mapped_column(String(ACTOR_LENGTH))
    created_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    updated_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    #: A partitioned dataset's partition (revision 0007): its blocks are ``block_runs``, its
    #: ``config_json`` every block's filter and its ``state_json`` the aggregate
    #: (:class:`odometer_core.ledger.blocks.Partitioned`). Null on every other dataset.
    partition_json: Mapped[PartitionJSON | None] = mapped_column(Json, default=None)
    #: The frontier of the Merkle tree over the ledger (revision 0012,
    #: :meth:`odometer_core.ledger.merkle.Frontier.to_json`), moved with the head by every
    #: entry (:func:`app.services._aggregate.stage_entry`). Null only before the first entry.
    merkle_json: Mapped[dict[str, Any] | None] = mapped_column(Json, default=None)


#: Indexes on an expression, which the models cannot declare for both dialects (each indexes its
#: own key of a column) and autogenerate cannot compare: created by their migration alone.
EXPRESSION_INDEXES = frozenset({"ix_block_runs_states"})  # revision 0010


def compared(obj: object, name: str | None, type_: str, reflected: bool, other: object) -> bool:
    """Alembic's ``include_object``: everything but :data:`EXPRESSION_INDEXES`."""
    return not (type_ == "index" and name in EXPRESSION_INDEXES)


class BlockRun(Base):
    """Consecutive open blocks ``[lo, hi)`` of a partitioned dataset that share one filter
    state (:class:`odometer_core.accounting.blocks.Run`); written only by the write path, under
    the dataset's lock (:mod:`app.db.blocks`)."""

    __tablename__ = "block_runs"

    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    lo: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    hi: Mapped[int] = mapped_column(BigInteger)
    state_json: Mapped[StateJSON] = mapped_column(Json)


class LedgerEntry(Base):
    """One append-only ledger row; its columns are exactly the hashed payload plus ``hash``."""

    __tablename__ = "ledger_entries"
    __table_args__ = (
        # Gapless per-dataset sequence; also a backstop against two writers on one aggregate.
        UniqueConstraint("dataset_id", "seq"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"))
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    invocation_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), index=True)
    actor: Mapped[str] = mapped_column(String(ACTOR_LENGTH))
    at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    accounting_version: Mapped[str] = mapped_column(String(32))
    declaration: Mapped[DeclarationJSON | None] = mapped_column(Json)
    request: Mapped[dict[str, Any] | None] = mapped_column(Json)
    charge: Mapped[AmountJSON | None] = mapped_column(Json)
    requested: Mapped[AmountJSON | None] = mapped_column(Json)
    refund: Mapped[AmountJSON | None] = mapped_column(Json)
    reservation: Mapped[dict[str, Any] | None] = mapped_column(Json)
    reason: Mapped[str | None] = mapped_column(Text)
    config: Mapped[ConfigJSON | None] = mapped_column(Json)
    state: Mapped[StateJSON] = mapped_column(Json)
    #: The organisation level's and the analyst quota's part of this step (revision 0002).
    org: Mapped[LevelPart | None] = mapped_column(Json)
    quota: Mapped[LevelPart | GrantQuota | None] = mapped_column(Json)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))

    @classmethod
    def from_export(cls, entry: Mapping[str, Any]) -> LedgerEntry:
        """The row of an entry as hashed (:meth:`odometer_core.ledger.Entry.to_export`)."""
        return cls(**{f: entry[f] for f in (*PAYLOAD_FIELDS, "hash")})

    def to_export(self) -> dict[str, Any]:
        """The entry as exported and hashed: every payload field plus ``hash`` (the shape of
        :class:`odometer_core.accounting.json_types.ExportedEntry`, typed as a plain dict while the
        routes that pass it on take one)."""
        out = {f: getattr(self, f) for f in PAYLOAD_FIELDS}
        out["hash"] = self.hash
        return out


class Invocation(Base):
    """The current view of one invocation (the ledger holds its history)."""

    __tablename__ = "invocations"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    status: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(32))
    #: the split sub-budget spent (the column kept its first name, ``ledger``)
    sub_budget: Mapped[str | None] = mapped_column("ledger", String(64))
    declaration: Mapped[DeclarationJSON] = mapped_column(Json)
    request: Mapped[dict[str, Any]] = mapped_column(Json)
    charge: Mapped[AmountJSON] = mapped_column(Json)
    requested: Mapped[AmountJSON] = mapped_column(Json)
    refund: Mapped[AmountJSON | None] = mapped_column(Json)
    reservation: Mapped[dict[str, Any] | None] = mapped_column(Json)
    cell: Mapped[str | None] = mapped_column(String(64))
    reason: Mapped[str | None] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(String(ACTOR_LENGTH))
    created_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    updated_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    #: Which upper levels hold a charge or reservation of this invocation:
    #: ``{"organisation": id | null, "quota": principal id | null, "quota_grant": seq}`` (null
    #: before 0002). ``quota_grant`` is the ``granted_seq`` of the grant whose quota holds it
    #: (since 0005; absent when no quota holds it, or unknown: reserved before grants were told
    #: apart and not found in the ledger).
    levels: Mapped[dict[str, Any] | None] = mapped_column(Json)


class IdempotencyRecord(Base):
    """A stored response for ``(principal, Idempotency-Key)`` (Stripe semantics)."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("principal_id", "key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    principal_id: Mapped[str] = mapped_column(String(ACTOR_LENGTH))
    key: Mapped[str] = mapped_column(String(255))
    fingerprint: Mapped[str] = mapped_column(String(64))
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"))
    outcome: Mapped[str] = mapped_column(String(32))
    response_body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[str] = mapped_column(String(TIME_LENGTH))


class Organisation(Base):
    """A tenant; also the organisation-level budget aggregate (the cap's filter, in any leaf
    mode: :func:`odometer_core.accounting.levels.cap_config`).

    ``cap_json`` is the cap in force (``{"epsilon", "delta", "mode"}``) or null;
    ``cap_config_json`` the cap filter's configuration (null on rows written before caps had
    modes: a ``basic`` filter of ``cap_json``) and ``cap_state_json`` its state, everything
    counted while a cap was in force; both are kept when the cap is removed, so a new cap
    continues from them. ``cap_seq`` numbers the ledger entries that touched the cap, across
    the organisation's datasets; ``cap_config_seq`` is the one that recorded the configuration
    in force (null: the next entry records it); ``cap_usage_json`` how many invocations each
    dataset registered under the cap.
    """

    __tablename__ = "organisations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    cap_json: Mapped[dict[str, Any] | None] = mapped_column(Json)
    cap_state_json: Mapped[StateJSON] = mapped_column(Json)
    cap_config_json: Mapped[ConfigJSON | None] = mapped_column(Json, default=None)
    cap_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cap_config_seq: Mapped[int | None] = mapped_column(Integer, default=None)
    cap_usage_json: Mapped[dict[str, Any] | None] = mapped_column(Json, default=None)
    #: the caps replaced after they counted, oldest first (``ClosedPhase.to_json``; null: none)
    cap_closed_json: Mapped[list[ClosedPhaseJSON] | None] = mapped_column(Json, default=None)
    created_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    updated_at: Mapped[str] = mapped_column(String(TIME_LENGTH))


class Principal(Base):
    """Someone who holds keys: a role in one organisation (admins: no organisation)."""

    __tablename__ = "principals"

    id: Mapped[str] = mapped_column(String(ACTOR_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    organisation_id: Mapped[str | None] = mapped_column(ForeignKey("organisations.id"), index=True)
    created_at: Mapped[str] = mapped_column(String(TIME_LENGTH))


class Grant(Base):
    """An analyst may spend on a dataset, optionally within a quota (a filter in the dataset's
    mode: ``quota_config_json`` / ``quota_state_json``, both null without a quota).

    ``granted_seq`` is the ``seq`` of the ``grant_changed`` ledger entry that made this grant
    (revision 0005): it tells this grant apart from every earlier or later grant of the same
    analyst on the dataset (a revoked grant's row is deleted, and SQLite may give the next one
    the same ``id``), and an invocation records it as the grant whose quota holds it."""

    __tablename__ = "grants"
    __table_args__ = (UniqueConstraint("dataset_id", "principal_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"))
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id"), index=True)
    quota_config_json: Mapped[ConfigJSON | None] = mapped_column(Json)
    quota_state_json: Mapped[StateJSON | None] = mapped_column(Json)
    created_by: Mapped[str] = mapped_column(String(ACTOR_LENGTH))
    created_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    granted_seq: Mapped[int] = mapped_column(Integer)


class ApiKey(Base):
    """An API key, stored as the SHA-256 of the whole token (tokens carry 256 random bits).

    ``role`` and ``organisation`` are copies of the principal's (which never change), so
    authentication is one indexed read.
    """

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    principal_id: Mapped[str] = mapped_column(String(ACTOR_LENGTH))
    role: Mapped[str] = mapped_column(String(16))
    organisation: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    revoked_at: Mapped[str | None] = mapped_column(String(TIME_LENGTH))
    expires_at: Mapped[str | None] = mapped_column(String(TIME_LENGTH))


class LedgerCheckpoint(Base):
    """A signed statement of a dataset's chain head (``seq``, ``head_hash``): append-only like
    the ledger (triggers in revision 0003). ``signature`` is the base64 Ed25519 signature of
    the canonical JSON statement (``app.services.checkpoints``) under the key ``key_id``."""

    __tablename__ = "ledger_checkpoints"
    __table_args__ = (UniqueConstraint("dataset_id", "seq", "key_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"))
    seq: Mapped[int] = mapped_column(Integer)
    head_hash: Mapped[str] = mapped_column(String(64))
    signed_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    key_id: Mapped[str] = mapped_column(String(64))
    signature: Mapped[str] = mapped_column(String(128))


class VerifiedPosition(Base):
    """The position a clean report's replay reached on a dataset (revision 0011), so that the
    first report after a start resumes from it instead of re-running the whole ledger
    (``app.services._verified``). ``body`` is the replayer's lossless JSON
    (:mod:`odometer_core.ledger.resume`), zlib-compressed; ``mac`` authenticates it, with the
    dataset, ``entries``, ``head_hash`` and the ``code`` that wrote it, under a key derived
    from the checkpoint key: a database writer without that key cannot forge a position. One
    row per dataset, replaced by a later position; deleting rows only costs a full re-run."""

    __tablename__ = "verified_positions"

    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    entries: Mapped[int] = mapped_column(Integer)
    head_hash: Mapped[str] = mapped_column(String(64))
    code: Mapped[str] = mapped_column(String(64))
    key_id: Mapped[str] = mapped_column(String(64))
    mac: Mapped[str] = mapped_column(String(64))
    written_at: Mapped[str] = mapped_column(String(TIME_LENGTH))
    body: Mapped[bytes] = mapped_column(LargeBinary)


class MerkleNode(Base):
    """A stored root of a perfect subtree of a dataset's Merkle tree (revision 0013): the MTH
    of the leaves ``[idx * 2^level, (idx + 1) * 2^level)`` (RFC 9162), kept for every
    complete subtree at least ``app.services.proofs.STORED_HEIGHT`` levels high, so that a
    proof reads ``O(log n)`` of them and at most two runs of entries' hashes below them
    (:func:`odometer_core.ledger.merkle.plan_reads`). Derived from the ledger and only
    appended to; missing rows are rebuilt from the entries (:func:`app.services.proofs.catch_up`,
    revision 0013)."""

    __tablename__ = "merkle_nodes"

    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    level: Mapped[int] = mapped_column(Integer, primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    hash: Mapped[bytes] = mapped_column(LargeBinary)


__all__ = [
    "ApiKey",
    "Base",
    "BlockRun",
    "Dataset",
    "Grant",
    "IdempotencyRecord",
    "Invocation",
    "LedgerCheckpoint",
    "LedgerEntry",
    "MerkleNode",
    "Organisation",
    "Principal",
    "VerifiedPosition",
]
