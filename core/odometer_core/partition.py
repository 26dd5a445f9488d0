"""A partitioned dataset's block keys: the public schedule that names its blocks.

It lives beside the accounting core, not in it: calendar periods read the system's time-zone
database (``zoneinfo``), and the core does no I/O.

The blocks of a partitioned dataset are named by a key the curator declares at creation, never
by the records: integer hash ``bucket``s (0 … n − 1), calendar periods (``day``, ``week``,
``month``: the period a record falls in is read in the declared time zone) or ``named`` parts
(declared once, in order). Each key maps to a block index, the integer the interval map of
:mod:`odometer_core.accounting.blocks` is keyed by, and back:

- ``day``: ``"2026-11-27"`` → days since 1970-01-01;
- ``week``: ``"2026-W48"`` (ISO 8601 week, Monday first) → weeks since the week of 1970-01-05;
- ``month``: ``"2026-11"`` → months since 1970-01;
- ``bucket``: ``"17"`` or ``17`` → 17, within 0 … ``buckets`` − 1;
- ``named``: a declared name → its position.

A key is of its partition's own type or refused (:meth:`Partition.index`): calendar keys are
text in exactly the form above (ASCII digits; no other ISO 8601 form such as ``20261127`` or a
week date for a day), a bucket an integer or its decimal text (ASCII digits, no sign, no
leading zero, never a boolean), a name one of the declared names. A new partition's time zone
is a canonical IANA name (:func:`new_partition`).

A selection is a list of inclusive key ranges (``{"from": k, "to": k}``) or keys
(``{"keys": [...]}``), turned into half-open index ranges by :meth:`Partition.selection`. The
``unit`` says what one block's filter protects: a ``record``, or a ``person`` when the key puts
every record of a person in one block (hash buckets of a person id); daily blocks protect events
(a person spans days). A ``person`` block's budget protects a person only against declarations
stated for a person's whole contribution to the block; :func:`check_assertions` refuses the
others (and ``tree_aggregation`` on ``add_remove`` datasets without its neighbouring
assumption).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Final, Literal, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from odometer_core.accounting.blocks import BlockError, Range, normalise
from odometer_core.accounting.declarations import Declaration, DeclarationError
from odometer_core.accounting.json_types import BlockSpan, PartitionJSON

KINDS: Final = ("bucket", "day", "week", "month", "named")
UNITS: Final = ("record", "person")
#: The most buckets or names a partition may declare (bounded work and state per dataset).
MAX_BLOCKS: Final = 10**7
MAX_NAMES: Final = 10_000
#: The most ranges or keys one selection may list.
MAX_SELECTION_ITEMS: Final = 1_000
#: The selection that names every open block.
EVERY_OPEN_BLOCK: Final = "all"
#: Beyond every block index (the window of "every open block").
UNBOUNDED: Final = 2**62

_EPOCH: Final = dt.date(1970, 1, 1)
_EPOCH_MONDAY: Final = dt.date(1970, 1, 5)

#: Each kind's key, as text (ASCII digits only: ``int`` and ``fromisoformat`` read more).
_DAY: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_WEEK: Final = re.compile(r"([0-9]{4})-W([0-9]{2})")
_MONTH: Final = re.compile(r"([0-9]{4})-([0-9]{2})")
_BUCKET: Final = re.compile(r"0|[1-9][0-9]*")
#: What each kind's key is, as a refusal names it.
KEY_TYPES: Final[Mapping[str, str]] = {
    "bucket": "an integer (a bucket number) or its decimal text",
    "day": "text YYYY-MM-DD",
    "week": "text YYYY-Www (an ISO 8601 week)",
    "month": "text YYYY-MM",
    "named": "text, one of the declared names",
}

#: The IANA time zone database's areas: a canonical zone is ``Area/Location`` (or ``UTC``).
IANA_AREAS: Final = frozenset(
    {
        "Africa",
        "America",
        "Antarctica",
        "Arctic",
        "Asia",
        "Atlantic",
        "Australia",
        "Europe",
        "Etc",
        "Indian",
        "Pacific",
    }
)
_ZONE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9][A-Za-z0-9_+\-]*){1,2}")

#: What an invocation's declaration is stated for (``contribution``): one record (the
#: default), or a person's whole contribution to each selected block.
CONTRIBUTIONS: Final = ("record", "person")
#: The neighbouring assumption a ``tree_aggregation`` on an ``add_remove`` dataset states
#: (``neighbours``): zero-out neighbours, each record's leaf fixed whatever the others.
NEIGHBOURS: Final = ("zero_out",)

Kind = Literal["bucket", "day", "week", "month", "named"]


@dataclass(frozen=True, slots=True)
class Partition:
    """A partition's key: its kind, what one block protects, and the kind's parameters."""

    kind: Kind
    unit: Literal["record", "person"]
    timezone: str | None = None  # calendar kinds
    buckets: int | None = None  # bucket
    names: tuple[str, ...] | None = None  # named
    #: the curator asserts a record's key never changes (a replacement stays in its block)
    immutable_key: bool = False

    # ------------------------------------------------------------------ keys
    def index(self, key: object) -> int:
        """The block index of ``key`` (:class:`BlockError` when it is not a key of this
        partition)."""
        try:
            return self._index(key)
        except (ValueError, TypeError) as exc:
            # true, false, null and numbers as the request wrote them
            shown = json.dumps(key) if isinstance(key, bool | float) or key is None else repr(key)
            raise BlockError(f"{shown} is not a {self.kind} key: {exc}") from None

    def _index(self, key: object) -> int:
        if isinstance(key, bool) or not (
            isinstance(key, str) or (self.kind == "bucket" and isinstance(key, int))
        ):
            raise TypeError(f"a {self.kind} key is {KEY_TYPES[self.kind]}")
        if self.kind == "bucket":
            if isinstance(key, str) and not _BUCKET.fullmatch(key):
                raise ValueError(
                    f"a bucket key is {KEY_TYPES['bucket']} (digits 0-9, no sign nor leading zero)"
                )
            b = int(key)
            assert self.buckets is not None
            if not 0 <= b < self.buckets:
                raise ValueError(f"buckets are 0 … {self.buckets - 1}")
            return b
        assert isinstance(key, str)
        if self.kind == "named":
            assert self.names is not None
            if key not in self.names:
                raise ValueError("not a declared name")
            return self.names.index(key)
        form = {"day": _DAY, "week": _WEEK, "month": _MONTH}[self.kind].fullmatch(key)
        if form is None:
            raise ValueError(f"a {self.kind} key is {KEY_TYPES[self.kind]}")
        if self.kind == "day":
            return (dt.date.fromisoformat(key) - _EPOCH).days
        if self.kind == "week":
            monday = dt.date.fromisocalendar(int(form[1]), int(form[2]), 1)
            return (monday - _EPOCH_MONDAY).days // 7
        if not 1 <= int(form[2]) <= 12:
            raise ValueError("a month is 01 … 12")
        return (int(form[1]) - 1970) * 12 + int(form[2]) - 1

    def key(self, index: int) -> str:
        """The key of block ``index``."""
        if self.kind == "bucket":
            return str(index)
        if self.kind == "named":
            assert self.names is not None
            return self.names[index]
        if self.kind == "day":
            return (_EPOCH + dt.timedelta(days=index)).isoformat()
        if self.kind == "week":
            year, week, _ = (_EPOCH_MONDAY + dt.timedelta(weeks=index)).isocalendar()
            return f"{year:04d}-W{week:02d}"
        year, month = divmod(index, 12)
        return f"{1970 + year:04d}-{month + 1:02d}"

    def period_of(self, moment: dt.datetime) -> int:
        """The block a record stamped ``moment`` falls in (calendar kinds: in the partition's
        time zone)."""
        if self.kind not in ("day", "week", "month") or self.timezone is None:
            raise BlockError(f"a {self.kind} partition has no calendar")
        if moment.tzinfo is None:
            raise BlockError("a moment needs its UTC offset")
        local = moment.astimezone(ZoneInfo(self.timezone)).date()
        if self.kind == "day":
            return (local - _EPOCH).days
        if self.kind == "week":
            return (local - dt.timedelta(days=local.weekday()) - _EPOCH_MONDAY).days // 7
        return (local.year - 1970) * 12 + local.month - 1

    # ------------------------------------------------------------------ selections
    def selection(self, obj: Mapping[str, Any]) -> tuple[Range, ...]:
        """``{"from": k, "to": k}`` (inclusive), ``{"ranges": [{"from", "to"}, …]}`` or
        ``{"keys": [k, …]}`` as normalised half-open index ranges."""
        items: list[Range] = []
        if "keys" in obj:
            keys = _listed(obj["keys"], "keys")
            items = [(i, i + 1) for i in (self.index(k) for k in keys)]
        else:
            spans = _listed(obj["ranges"], "ranges") if "ranges" in obj else [obj]
            for span in spans:
                if not isinstance(span, Mapping) or set(span) != {"from", "to"}:
                    raise BlockError("a block range is {'from': key, 'to': key}")
                lo, hi = self.index(span["from"]), self.index(span["to"])
                if hi < lo:
                    raise BlockError(f"the range {span['from']} … {span['to']} is reversed")
                items.append((lo, hi + 1))
        return normalise(items)

    def resolve(self, selection: object) -> tuple[Range, ...] | None:
        """The index ranges a request's ``blocks`` names: ``"all"`` (every open block: ``None``,
        resolved against the blocks open when it is decided), or an object as
        :meth:`selection` reads it (:class:`BlockError` otherwise)."""
        if selection == EVERY_OPEN_BLOCK:
            return None
        if not isinstance(selection, Mapping):
            raise BlockError("'blocks' is an object or 'all'")
        return self.selection(selection)

    def keys(self, ranges: Sequence[Range]) -> list[BlockSpan]:
        """Index ranges as a person reads them: inclusive keys and the number of blocks."""
        return [
            {"from": self.key(lo), "to": self.key(hi - 1), "blocks": hi - lo} for lo, hi in ranges
        ]

    def label(self, ranges: Sequence[Range], limit: int = 5) -> str:
        """``2026-11-20 … 2026-11-26, 2026-11-28`` (and how many more)."""
        parts = [
            self.key(lo) if hi - lo == 1 else f"{self.key(lo)} … {self.key(hi - 1)}"
            for lo, hi in ranges[:limit]
        ]
        more = f" and {len(ranges) - limit} more ranges" if len(ranges) > limit else ""
        return ", ".join(parts) + more

    @property
    def protects(self) -> str:
        """What one block's budget protects, as the API says it."""
        if self.unit == "person":
            return "each block's budget protects every person whose records fall in it"
        return "each block's budget protects one record (an event) of the block"

    @property
    def requires(self) -> str | None:
        """What a declaration must state for :attr:`protects` to hold (``None``: nothing
        beyond a record-level guarantee), as the API says it."""
        if self.unit == "person":
            return PERSON_REQUIRED
        return None

    # ------------------------------------------------------------------ codec
    def to_json(self) -> PartitionJSON:
        out: PartitionJSON = {"kind": self.kind, "unit": self.unit}
        if self.timezone is not None:
            out["timezone"] = self.timezone
        if self.buckets is not None:
            out["buckets"] = self.buckets
        if self.names is not None:
            out["names"] = list(self.names)
        if self.immutable_key:
            out["immutable_key"] = True
        return out


def _listed(value: object, name: str) -> Sequence[Any]:
    if not isinstance(value, list) or not value:
        raise BlockError(f"'{name}' is a non-empty list")
    if len(value) > MAX_SELECTION_ITEMS:
        raise BlockError(f"'{name}' lists at most {MAX_SELECTION_ITEMS} items")
    return value


def new_partition(obj: Mapping[str, Any]) -> Partition:
    """A partition a curator declares now: :func:`parse_partition`, and a calendar kind's
    time zone a canonical IANA name (:func:`canonical_zone`). Partitions stored before the
    rule are read by :func:`parse_partition` as they were declared."""
    partition = parse_partition(obj)
    if partition.timezone is not None and not canonical_zone(partition.timezone):
        raise BlockError(
            f"unknown time zone {partition.timezone!r}: a partition's time zone is a "
            "canonical IANA name, Area/Location (e.g. 'Europe/Zurich') or 'UTC'; not "
            "'localtime', 'posixrules', 'Factory', the 'posix/' and 'right/' copies, nor the "
            "old names kept for compatibility (e.g. 'US/Eastern', 'GB')"
        )
    return partition


def canonical_zone(name: str) -> bool:
    """Whether ``name`` is a canonical IANA time zone name: ``UTC``, or ``Area/Location`` (or
    ``Area/Location/Sub``) in one of the database's areas (:data:`IANA_AREAS`), and in the
    system's time zone database. That leaves out the system's ``localtime`` (whatever the
    host's clock is set to), ``posixrules``, ``Factory``, the ``posix/`` and ``right/`` copies
    (``right/`` counts leap seconds: its days are not civil days) and the backward-compatible
    names outside the areas (``US/Eastern``, ``GB``, ``EST5EDT``, …)."""
    if name == "UTC":
        return True
    return (
        _ZONE.fullmatch(name) is not None
        and name.partition("/")[0] in IANA_AREAS
        and name in _available_zones()
    )


@cache
def _available_zones() -> frozenset[str]:
    return frozenset(available_timezones())


def parse_partition(obj: Mapping[str, Any]) -> Partition:
    """A partition declared at a dataset's creation (:class:`BlockError` when it is bad)."""
    unknown = set(obj) - {"kind", "unit", "timezone", "buckets", "names", "immutable_key"}
    if unknown:
        raise BlockError(f"unknown partition fields: {', '.join(sorted(unknown))}")
    immutable = obj.get("immutable_key", False)
    if not isinstance(immutable, bool):
        raise BlockError("'immutable_key' is true or false")
    return replace(_parsed(obj), immutable_key=immutable)


def _parsed(obj: Mapping[str, Any]) -> Partition:
    kind, unit = obj.get("kind"), obj.get("unit")
    if kind not in KINDS:
        raise BlockError(f"a partition's kind is one of {', '.join(KINDS)}")
    if unit not in UNITS:
        raise BlockError(
            "a partition says what one block protects: 'record', or 'person' when every "
            "record of a person falls in one block"
        )
    unit_ = cast(Literal["record", "person"], unit)
    calendar = kind in ("day", "week", "month")
    if (
        calendar != ("timezone" in obj)
        or (kind == "bucket") != ("buckets" in obj)
        or (kind == "named") != ("names" in obj)
    ):
        raise BlockError(
            "calendar partitions take a 'timezone', bucket partitions 'buckets', named "
            "partitions 'names', and no other kind any of them"
        )
    if calendar:
        zone = obj["timezone"]
        if not isinstance(zone, str):
            raise BlockError("'timezone' is an IANA time zone name, e.g. 'Europe/Zurich'")
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise BlockError(f"unknown time zone {zone!r}") from None
        return Partition(cast(Kind, kind), unit_, timezone=zone)
    if kind == "bucket":
        buckets = obj["buckets"]
        if (
            isinstance(buckets, bool)
            or not isinstance(buckets, int)
            or not (1 <= buckets <= MAX_BLOCKS)
        ):
            raise BlockError(f"'buckets' is an integer in 1 … {MAX_BLOCKS}")
        return Partition("bucket", unit_, buckets=buckets)
    names = obj["names"]
    if (
        not isinstance(names, list)
        or not 1 <= len(names) <= MAX_NAMES
        or not all(isinstance(n, str) and 0 < len(n) <= 64 for n in names)
        or len(set(names)) != len(names)
    ):
        raise BlockError(f"'names' are 1 … {MAX_NAMES} distinct names of 1 … 64 characters")
    return Partition("named", unit_, names=tuple(names))


def window_of(selections: Sequence[tuple[Range, ...] | None]) -> tuple[Range, ...]:
    """The spans of blocks a transaction's resolved selections touch: each selected range
    widened by one block on either side (the neighbours, whose states decide whether new runs
    merge with them), overlapping spans joined; every block for ``None`` (every open block);
    no span for no selection. The runs between two spans are never read: a selection of k
    ranges reads the runs of k spans, however far apart they lie."""
    if any(s is None for s in selections):
        return ((-UNBOUNDED, UNBOUNDED),)
    spans = [(lo - 1, hi + 1) for s in selections if s for lo, hi in s]
    return normalise(spans) if spans else ()


# ---------------------------------------------------------------------------- assertions
#: What a person-unit dataset requires of a declaration, as the API says it.
PERSON_REQUIRED: Final = (
    'declarations marked "contribution": "person": their guarantee holds for neighbouring '
    "inputs that differ in any or all of one person's records in each selected block (the "
    "analyst bounds each person's contribution to a block and calibrates the sensitivity to "
    "that bound); declarations stated for one record are refused"
)


#: What an ``add_remove`` dataset requires of a tree aggregation, as the API says it.
TREE_REQUIRED: Final = (
    'tree_aggregation (at any depth) marked "neighbours": "zero_out": its charge, the Gaussian '
    "of sensitivity √d, holds when adding or removing a record changes its own leaf only, "
    "every other record keeping its step (Kairouz et al. 2021); unmarked trees are refused"
)


def requirements(unit: str | None, relation: str) -> list[dict[str, str]]:
    """What a declaration must assert on a dataset of partition ``unit`` (``None``: not
    partitioned) and ``relation`` for its budget's guarantee to hold — each rule
    :func:`check_assertions` enforces, as the dataset's view states it: the field, the value
    it must carry, the declarations it applies to and why."""
    out: list[dict[str, str]] = []
    if unit == "person":
        out.append(
            {
                "field": "contribution",
                "value": "person",
                "applies_to": "every declaration",
                "text": PERSON_REQUIRED,
            }
        )
    if relation == "add_remove":
        out.append(
            {
                "field": "neighbours",
                "value": "zero_out",
                "applies_to": "declarations containing a tree_aggregation",
                "text": TREE_REQUIRED,
            }
        )
    return out


def check_assertions(
    unit: str | None,
    relation: str,
    declaration: Declaration,
    *,
    contribution: str | None = None,
    neighbours: str | None = None,
) -> None:
    """Refuse (:class:`DeclarationError`, naming the field) a declaration whose guarantee is
    not stated for the neighbours the budget of a dataset of partition ``unit`` (``None``: not
    partitioned) and ``relation`` protects:

    - on a ``person`` partition, one not marked ``contribution: "person"`` — a guarantee
      stated for one record protects a person with k records in a block only by group privacy
      (kε for pure ε-DP; (kε, k·e^{(k−1)ε}·δ) for (ε, δ)-DP), not by the block's budget;
    - on an ``add_remove`` dataset, a ``tree_aggregation`` (at any depth) not marked
      ``neighbours: "zero_out"`` — its sensitivity √d assumes each record keeps its leaf when
      another is added or removed (Kairouz et al. 2021's replace-with-zero neighbours);
    - ``neighbours`` on a declaration without a ``tree_aggregation`` (it states nothing).

    ``docs/accounting.md``, *Partitioned datasets*, states the theorems and their conditions."""
    if contribution is not None and contribution not in CONTRIBUTIONS:
        raise DeclarationError(
            f"'contribution' is one of {', '.join(CONTRIBUTIONS)}", field="contribution"
        )
    if neighbours is not None and neighbours not in NEIGHBOURS:
        raise DeclarationError(
            f"'neighbours' is one of {', '.join(NEIGHBOURS)}", field="neighbours"
        )
    if unit == "person" and contribution != "person":
        raise DeclarationError(
            "this dataset's blocks protect persons (partition unit 'person'): it admits "
            "only declarations whose guarantee holds for neighbouring inputs that differ in "
            "any or all of one person's records in each selected block. Bound each person's "
            "records in a block (e.g. keep at most k), calibrate the sensitivity to that bound and "
            'send "contribution": "person"; a guarantee stated for one record protects a '
            "person with k records in a block only by group privacy (k times its ε)",
            field="contribution",
        )
    if neighbours is None and relation != "add_remove":
        return
    tree = any(kind == "tree_aggregation" for kind in _kinds(declaration))
    if neighbours is not None and not tree:
        raise DeclarationError(
            "'neighbours' states tree_aggregation's neighbouring assumption; this declaration "
            "has no tree_aggregation: leave it out",
            field="neighbours",
        )
    if tree and neighbours is None:
        raise DeclarationError(
            "tree_aggregation on an add_remove dataset is charged for zero-out neighbours "
            "(Kairouz et al. 2021): adding or removing a record changes its own leaf only, "
            "every other record keeping its step. When the pipeline fixes each record's step "
            'whatever the others, send "neighbours": "zero_out"; otherwise one removal shifts '
            "the later records to other leaves and the charge does not bound it",
            field="neighbours",
        )


def _kinds(declaration: Declaration) -> Iterator[str]:
    """The kinds of ``declaration`` and of every declaration inside it."""
    yield declaration.kind
    for f in dataclasses.fields(declaration):
        value = getattr(declaration, f.name)
        for inner in value if isinstance(value, tuple) else (value,):
            for item in inner if isinstance(inner, tuple) else (inner,):
                if isinstance(item, Declaration):
                    yield from _kinds(item)
