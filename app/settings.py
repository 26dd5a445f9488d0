"""Service configuration from the environment (pydantic-settings).

Every variable is documented in the configuration table of docs/operations.md.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///./odometer.db"


def normalise_database_url(url: str) -> str:
    """Accept the usual ``postgresql://`` / ``postgres://`` spellings and select psycopg 3."""
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Settings(BaseSettings):
    """Runtime settings; read once per process (see :func:`get_settings`)."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        validation_alias=AliasChoices("DATABASE_URL", "ODOMETER_DATABASE_URL"),
    )
    admin_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("ODOMETER_ADMIN_KEY")
    )
    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, validation_alias=AliasChoices("ODOMETER_MAX_BODY_BYTES")
    )
    sqlite_busy_timeout_ms: int = Field(
        default=30_000, ge=0, validation_alias=AliasChoices("ODOMETER_SQLITE_BUSY_TIMEOUT_MS")
    )
    db_pool_size: int = Field(
        default=10, ge=1, validation_alias=AliasChoices("ODOMETER_DB_POOL_SIZE")
    )
    db_max_overflow: int = Field(
        default=10, ge=0, validation_alias=AliasChoices("ODOMETER_DB_MAX_OVERFLOW")
    )
    #: Worker processes that compute expensive charges before the budget's lock is taken
    #: (``app/services/charging.py``); 0 = in the request's thread, without a CPU budget.
    charge_workers: int = Field(
        default=2, ge=0, le=64, validation_alias=AliasChoices("ODOMETER_CHARGE_WORKERS")
    )
    #: CPU seconds one request's charge may use before it is refused (422 ChargeTooExpensive).
    charge_cpu_seconds: float = Field(
        default=1.0, gt=0, le=60, validation_alias=AliasChoices("ODOMETER_CHARGE_CPU_SECONDS")
    )
    #: Seconds a request waits for a free charge worker before a 503 with Retry-After.
    charge_wait_seconds: float = Field(
        default=5.0, gt=0, le=300, validation_alias=AliasChoices("ODOMETER_CHARGE_WAIT_SECONDS")
    )
    #: Serve each dataset's writers first come, first served within a server process
    #: (``app/writepath/queue.py``) before they wait on the database's row lock (PostgreSQL only).
    fair_queue: bool = Field(default=True, validation_alias=AliasChoices("ODOMETER_FAIR_QUEUE"))
    #: Registrations of one caller that arrive while an earlier one is being written share the
    #: next transaction, up to this many (1: a transaction each).
    group_commit: int = Field(
        default=64, ge=1, le=1024, validation_alias=AliasChoices("ODOMETER_GROUP_COMMIT")
    )
    #: Seconds between the rounds of the background verification of fragmented partitioned
    #: datasets (``app/services/verify_behind.py``); 0 turns it off. A dataset's first report
    #: re-runs what the last round has not: at 2 s that was up to 5.5x the unfragmented
    #: dataset's report in the fragmenting attack, at 0.5 s within 3.1x
    #: (``benchmarks/RESULTS.md``); a round with nothing new is one query.
    verify_behind_seconds: float = Field(
        default=0.5,
        ge=0,
        le=3600,
        validation_alias=AliasChoices("ODOMETER_VERIFY_BEHIND_SECONDS"),
    )
    #: PEM file of the Ed25519 key that signs ledger checkpoints (``odometer
    #: checkpoint-keygen``); unset = no checkpoints are signed (no silent throw-away key).
    checkpoint_key: str | None = Field(
        default=None, validation_alias=AliasChoices("ODOMETER_CHECKPOINT_KEY")
    )
    #: Sign a dataset's head every N ledger entries (seq divisible by N).
    checkpoint_every: int = Field(
        default=1000, ge=1, validation_alias=AliasChoices("ODOMETER_CHECKPOINT_EVERY")
    )
    #: Directory where every committed ledger head is witnessed, outside the database
    #: (``docs/witness.md``); unset = no witness (a restored backup goes undetected).
    witness_dir: str | None = Field(
        default=None, validation_alias=AliasChoices("ODOMETER_WITNESS_DIR")
    )
    #: The witness's own key (a file holding its signer key text, ``odometer witness-keygen``):
    #: with it the witness cosigns the signed tree heads it sees (``docs/witness.md``).
    witness_key: str | None = Field(
        default=None, validation_alias=AliasChoices("ODOMETER_WITNESS_KEY")
    )
    #: Seconds between two comparisons of the database's heads with the witness (0: at start
    #: only; every write also compares its dataset's head).
    witness_check_seconds: float = Field(
        default=30.0, ge=0, validation_alias=AliasChoices("ODOMETER_WITNESS_CHECK_SECONDS")
    )
    #: The witness's bound: the answer to a write committed at ``t`` is sent only once every
    #: head committed before ``t - lag`` is in the witness (else the request waits for the
    #: witness writer, at most 5 s, then answers 503). 0: each answer waits for its own heads.
    witness_lag_seconds: float = Field(
        default=1.0, ge=0, le=60, validation_alias=AliasChoices("ODOMETER_WITNESS_LAG_SECONDS")
    )
    #: Datasets whose budgets ``/metrics`` exports as gauges (``app/services/gauges.py``), by id
    #: or exact name, comma-separated; empty = none. At most :data:`MAX_METRICS_DATASETS`, so
    #: that the series a scrape returns stay bounded (no wildcard: every dataset is unbounded).
    metrics_datasets: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), validation_alias=AliasChoices("ODOMETER_METRICS_DATASETS")
    )
    #: A read-only database URL (a streaming replica of ``database_url``) that serves exports,
    #: reports, ledger and block pages, status reads and the dashboard's polling
    #: (``app/services/reads.py``); unset = every read on the primary, as before. Writes,
    #: previews, capacities and authentication always use the primary.
    read_database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("ODOMETER_READ_DATABASE_URL")
    )
    #: Seconds a read waits for the replica to reach the ledger seqs its client has shown
    #: (``Odometer-Min-Seq``) before it is served by the primary instead.
    read_replica_wait_seconds: float = Field(
        default=0.25,
        ge=0,
        le=5,
        validation_alias=AliasChoices("ODOMETER_READ_REPLICA_WAIT_SECONDS"),
    )
    #: The replica's own pool (it serves only reads).
    read_pool_size: int = Field(
        default=10, ge=1, validation_alias=AliasChoices("ODOMETER_READ_POOL_SIZE")
    )

    @field_validator("database_url")
    @classmethod
    def _normalise_url(cls, value: str) -> str:
        return normalise_database_url(value.strip())

    @field_validator("read_database_url")
    @classmethod
    def _normalise_read_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return normalise_database_url(value.strip())

    @field_validator("admin_key")
    @classmethod
    def _blank_is_unset(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            return None
        if value is not None and len(value.get_secret_value()) < MIN_ADMIN_KEY:
            raise ValueError(weak_admin_key(len(value.get_secret_value())))
        return value

    @field_validator("metrics_datasets", mode="before")
    @classmethod
    def _dataset_list(cls, value: Any) -> tuple[str, ...]:
        return metrics_datasets(value)


#: The shortest admin key the service accepts (a guessable one, e.g. ``change-me``, would hand
#: every dataset to whoever guesses it).
MIN_ADMIN_KEY = 16


def weak_admin_key(length: int) -> str:
    return (
        f"ODOMETER_ADMIN_KEY has {length} characters; an admin key needs at least "
        f"{MIN_ADMIN_KEY}: unset it and `make run` makes one, or use the output of "
        "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
    )


#: The most datasets ``ODOMETER_METRICS_DATASETS`` may list (each adds six series, and one per
#: unit of what is left, to every scrape of every worker).
MAX_METRICS_DATASETS = 100


def metrics_datasets(value: Any) -> tuple[str, ...]:
    """The datasets listed, from ``a, b,c`` or a sequence: blanks dropped, each once, in order;
    more than :data:`MAX_METRICS_DATASETS`, or a wildcard, is refused in one line."""
    if not isinstance(value, str | list | tuple):
        raise ValueError("ODOMETER_METRICS_DATASETS is a comma-separated list of datasets")
    items = value.split(",") if isinstance(value, str) else value
    listed = tuple(dict.fromkeys(s for s in (str(item).strip() for item in items) if s))
    if "*" in listed:
        raise ValueError(
            "ODOMETER_METRICS_DATASETS names datasets by id or name; '*' (every dataset) is not "
            "accepted, so that the series stay bounded: list the datasets (a dataset named '*': "
            "give its id)"
        )
    if len(listed) > MAX_METRICS_DATASETS:
        raise ValueError(
            f"ODOMETER_METRICS_DATASETS lists {len(listed)} datasets; at most "
            f"{MAX_METRICS_DATASETS} are exported (each adds series to every scrape): list fewer"
        )
    return listed


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (environment read once)."""
    return Settings()
