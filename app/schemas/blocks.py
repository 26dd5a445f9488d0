"""Partitioned datasets: the partition a curator declares, the block selections analysts name,
and the per-block status."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    computed_field,
)
from pydantic.json_schema import JsonSchemaValue

from app.schemas._types import JSONObject
from app.schemas.common import (
    Form,
    JsonNumber,
    StrictModel,
    json_integer,
    one_form_of,
    optional,
)
from app.schemas.shown import StatusShown, status_shown
from odometer_core.partition import MAX_BLOCKS


def _key_type(value: object) -> object:
    """A block key is text or an integer as sent: never a boolean (``true`` would be read as
    bucket 1) nor a number with a fraction (``1.5``); an integer written with a fraction or an
    exponent (``3.0``, ``3e0``) is that integer, as everywhere JSON Schema says "integer".
    Which of text or integer the dataset's partition takes is its own
    (``odometer_core.partition.Partition.index``)."""
    if isinstance(value, float) and not isinstance(value, bool):
        integer = (
            json_integer(value)
            if isinstance(value, JsonNumber)
            else int(value)
            if value.is_integer()
            else None
        )
        if integer is not None:
            return integer
    if isinstance(value, bool) or not isinstance(value, str | int):
        sent = (
            "a boolean"
            if isinstance(value, bool)
            else "a number with a fraction"  # as the client wrote it
            if isinstance(value, float)
            else f"a {type(value).__name__}"
        )
        raise ValueError(
            "a block key is text (a day, week, month or declared name) or an integer (a "
            f"bucket number), not {sent}"
        )
    return value


#: A block key: a day ``2026-11-27``, a week ``2026-W48``, a month ``2026-11``, a bucket
#: number, or a declared name. The schema bounds what any partition could hold (a bucket below
#: 10⁷, a name of 1 … 64 characters); which keys a dataset's partition has is its own.
BlockKey = Annotated[
    str | int,
    BeforeValidator(_key_type),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "minLength": 1, "maxLength": 64},
                {"type": "integer", "minimum": 0, "maximum": MAX_BLOCKS - 1},
            ],
            "description": "a block key of the dataset's partition, of its own type: text "
            "for a day 2026-11-27, a week 2026-W48, a month 2026-11 or a declared name; an "
            "integer or its decimal text for a bucket number (never a boolean)",
            "examples": ["2026-11-27"],
        }
    ),
]


def _partition_schema(schema: JsonSchemaValue) -> None:
    """Each kind takes its own field: calendar kinds a ``timezone``, ``bucket`` its
    ``buckets``, ``named`` its ``names`` (distinct, 1 … 64 characters each)."""
    names = schema["properties"]["names"]
    names["items"] = {"type": "string", "minLength": 1, "maxLength": 64}
    names["uniqueItems"] = True
    common = ("kind", "unit")
    one_form_of(
        schema,
        Form(
            (*common, "timezone", "immutable_key"),
            (*common, "timezone"),
            kind={"type": "string", "enum": ["day", "week", "month"]},
        ),
        Form(
            (*common, "buckets", "immutable_key"),
            (*common, "buckets"),
            kind={"type": "string", "const": "bucket"},
        ),
        Form(
            (*common, "names", "immutable_key"),
            (*common, "names"),
            kind={"type": "string", "const": "named"},
        ),
    )


class PartitionIn(StrictModel):
    """How a dataset's records fall into blocks: a public key, never the records themselves."""

    model_config = ConfigDict(json_schema_extra=_partition_schema)

    kind: Literal["bucket", "day", "week", "month", "named"] = Field(
        description="integer hash buckets, calendar periods (in 'timezone'), or named parts"
    )
    unit: Literal["record", "person"] = Field(
        description="what one block's budget protects: a record (an event), or a person when "
        "every record of a person falls in one block (hash buckets of a person id). Daily "
        "blocks protect events: a person spans days. A 'person' dataset admits only "
        'invocations marked "contribution": "person" (their guarantee holds for a '
        "person's whole contribution to each selected block); the others are refused (422)"
    )
    timezone: str | None = optional(
        max_length=64,
        description="calendar kinds: the IANA time zone periods are read in, by its canonical "
        "name: Area/Location (e.g. 'Europe/Zurich') or 'UTC'; not 'localtime', 'posixrules', "
        "'Factory', 'posix/…', 'right/…' nor the backward-compatible names ('US/Eastern', "
        "'GB', …)",
    )
    buckets: int | None = optional(ge=1, le=10_000_000, description="bucket kind: how many")
    names: list[str] | None = optional(
        min_length=1, max_length=10_000, description="named kind: the parts, in order"
    )
    immutable_key: bool = Field(
        default=False,
        description="the curator asserts that a record's block key never changes (a "
        "replacement stays in its block): required for relation 'replace_one'",
    )


class BlockRange(StrictModel):
    """Blocks ``from`` … ``to``, both included."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: BlockKey = Field(alias="from")
    to: BlockKey


class BlockKeys(StrictModel):
    """These blocks."""

    keys: list[BlockKey] = Field(min_length=1, max_length=1000)


class BlockRanges(StrictModel):
    """The blocks of several ranges."""

    ranges: list[BlockRange] = Field(min_length=1, max_length=1000)


#: What an invocation on a partitioned dataset reads: a range, keys, ranges, or ``"all"``
#: (every open block, resolved when it is decided and recorded as ranges).
BlockSelection = BlockRange | BlockKeys | BlockRanges | Literal["all"]


def selection_json(selection: BlockSelection | None) -> Any:
    """A selection as the service reads it (``from`` by its name)."""
    if selection is None or isinstance(selection, str):
        return selection
    return selection.model_dump(by_alias=True)


class BlocksChange(StrictModel):
    """Open blocks (on the public schedule) or retire them; exactly one of the two."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema: one_form_of(schema, Form(("open",)), Form(("retire",)))
    )

    open: BlockRange | None = optional(description="blocks to open, never opened before")
    retire: BlockRange | None = optional(description="open blocks to retire for good")


class BlockRun(BaseModel):
    """Consecutive blocks that share one history, and their status."""

    from_: str = Field(alias="from", serialization_alias="from")
    to: str
    blocks: int
    fraction_spent: str = Field(
        description="the fraction of each block's budget spent, as a summary's "
        "fraction_spent (the unit the mode's filter counts, rounded up to 4 decimals; "
        "docs/accounting.md, One fraction per budget); what is left is 1 − it"
    )
    status: JSONObject

    @computed_field(  # type: ignore[prop-decorator]
        description="the run's status as the dashboard prints it (app/schemas/shown.py; its "
        "fraction_spent is this run's)"
    )
    @property
    def shown(self) -> StatusShown:
        return status_shown(self.status, self.fraction_spent)


class BlocksPage(BaseModel):
    """A page of a partitioned dataset's open blocks, as runs of equal history."""

    dataset_id: str
    partition: JSONObject
    open: int
    runs: list[BlockRun]
    next: str | None = Field(description="the key to pass as 'from' for the next page")


class BlocksChanged(BaseModel):
    """Blocks opened or retired (a ledger entry)."""

    dataset_id: str
    action: Literal["opened", "retired"]
    range: JSONObject = Field(description="the blocks, as keys, and how many")
    open: int = Field(description="how many blocks are open now")
    ledger: JSONObject
