"""The ledger's canonical encoding and hash chain.

This module is deliberately small and free of database and web imports: the offline verifier
(``odometer verify``) and the service share it, so an export is checked with exactly the
encoding it was written with.

An entry is a JSON object with the fields in :data:`PAYLOAD_FIELDS` plus ``hash``, where

    hash = SHA-256( canonical_bytes(entry without "hash") )
    canonical_bytes(x) = json.dumps(x, sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False).encode("utf-8")

and ``prev_hash`` is the previous entry's ``hash`` (:data:`GENESIS_HASH` for ``seq`` 1). Every
amount inside an entry is a decimal *string* (the accounting core's ``fmt``); binary floats are
refused by :func:`canonical_bytes` because their text is not a stable part of the contract.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import orjson

GENESIS_HASH: Final = "0" * 64

#: Every field of an entry except ``hash``, in export (CSV column) order.
PAYLOAD_FIELDS: Final[tuple[str, ...]] = (
    "dataset_id",
    "seq",
    "kind",
    "invocation_id",
    "actor",
    "at",
    "accounting_version",
    "declaration",
    "request",
    "charge",
    "requested",
    "refund",
    "reservation",
    "reason",
    "config",
    "state",
    "org",
    "quota",
    "prev_hash",
)

#: Fields added with organisations (revision 0002): hashed only when not null, so entries
#: written before they existed keep their hashes.
OPTIONAL_FIELDS: Final[frozenset[str]] = frozenset({"org", "quota"})


def _problem(value: Any, path: str = "$") -> str | None:
    """The first binary float or non-string key, named by its path (error messages only)."""
    if isinstance(value, float):
        return f"{path}: binary floats are not allowed in ledger entries, use strings"
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{path}: keys must be strings"
            found = _problem(v, f"{path}.{k}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = _problem(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


#: Fields every entry must carry (in export order, for the message naming the missing ones).
_REQUIRED_ORDER: Final = tuple(f for f in (*PAYLOAD_FIELDS, "hash") if f not in OPTIONAL_FIELDS)
_REQUIRED_FIELDS: Final = frozenset(_REQUIRED_ORDER)

_SCALARS: Final = frozenset({str, int, bool, type(None)})


def _check_no_floats(value: Any) -> bool:
    """Refuse binary floats and non-string keys anywhere in ``value``; ``True`` when every
    value in it is of a type the standard encoder writes as itself (strings, integers,
    booleans, nulls, dicts, lists and tuples, and their subclasses), which
    :func:`_dumps` may hand to orjson.

    Iterative and type-dispatched, and no path string is built unless something is wrong:
    this runs on every hashed entry, and the recursive walk that built a path per node was a
    third of ``odometer verify``'s time. Other types are left to ``json.dumps`` to refuse.
    """
    plain = True
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind is dict or (kind is not float and isinstance(item, Mapping)):
            plain = plain and isinstance(item, dict)
            for k, v in item.items():
                if type(k) is not str and not isinstance(k, str):
                    _refuse(value)
                if type(v) not in _SCALARS:
                    push(v)
        elif kind is list or kind is tuple or isinstance(item, list | tuple):
            extend(item)
        elif isinstance(item, float):
            _refuse(value)
        elif not isinstance(item, str | int):
            plain = False
    return plain


def _refuse(value: Any) -> NoReturn:
    raise TypeError(_problem(value) or "$: not encodable")


def _refuse_float(text: str) -> Any:
    raise ValueError(f"binary float {text!r}: amounts in ledger entries are decimal strings")


#: Built once: ``json.loads(text, parse_float=...)`` would build a decoder per call, which
#: costs as much as the parse of a ledger line.
_STRICT_DECODER: Final = json.JSONDecoder(parse_float=_refuse_float, parse_constant=_refuse_float)


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses binary floats and ``NaN``/``Infinity`` while parsing.

    A value parsed this way holds only strings, ints, booleans, nulls, lists and string-keyed
    dicts, so hashing it needs no float walk (:class:`ChainWalker` with ``strict_json=True``).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return _STRICT_DECODER.decode(text)


def _standard(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


#: orjson's keys sorted; its output is compact UTF-8, as :func:`_standard`'s.
_SORTED: Final = orjson.OPT_SORT_KEYS


def _dumps(value: Any) -> bytes:
    """The canonical bytes of ``value``, whose every value is a string, an integer, a boolean,
    a null, a dict or a list (or a tuple; subclasses of these included): the text
    :func:`_standard` writes, written by orjson in about a tenth of the standard encoder's
    CPU for a registration's entry (an entry is hashed on every admission:
    ``benchmarks/RESULTS.md``, *Write path CPU, this round*). Both write keys sorted by code
    point, no whitespace, UTF-8 unescaped but for the quote, the backslash and the control
    characters, escaped alike (``tests/ledger/test_canonical_orjson.py`` compares them
    character by character). What orjson refuses (an integer beyond 64 bits, a string that is
    not valid Unicode, nesting past 255 levels) goes to the standard encoder, which writes it
    or raises as it always did."""
    try:
        return orjson.dumps(value, option=_SORTED)
    except orjson.JSONEncodeError:
        return _standard(value)


def canonical_bytes(value: Any) -> bytes:
    """The canonical UTF-8 JSON encoding used for hashing (sorted keys, no whitespace)."""
    if _check_no_floats(value):
        return _dumps(value)
    return _standard(value)  # other types: written, or refused, as the standard encoder does


def output_digest(output: Any) -> str:
    """SHA-256 hex digest of a released output's :func:`canonical_bytes`: what a settle entry
    records (``request.output_digest``) so that an auditor can match the ledger to the
    publication without the ledger holding the output. Binary floats and ``NaN`` are refused
    (``TypeError`` / ``ValueError``) as in entries: their text is not a stable encoding."""
    return hashlib.sha256(canonical_bytes(output)).hexdigest()


def _payload(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: v for k, v in entry.items() if k != "hash" and not (k in OPTIONAL_FIELDS and v is None)
    }


def entry_hash(entry: Mapping[str, Any]) -> str:
    """SHA-256 hex digest over every field of ``entry`` except ``hash``."""
    return hashlib.sha256(canonical_bytes(_payload(entry))).hexdigest()


def parsed_entry_hash(entry: Mapping[str, Any]) -> str:
    """:func:`entry_hash` of an entry parsed by :func:`loads_strict` (no float walk: the
    parser already refused floats, and JSON object keys are always strings)."""
    payload = dict(entry)
    payload.pop("hash", None)
    for name in OPTIONAL_FIELDS:
        if name in payload and payload[name] is None:
            del payload[name]
    return hashlib.sha256(_dumps(payload)).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """One defect found while walking the chain (``seq`` as stored, or the position)."""

    position: int
    seq: object
    problem: str


class ChainWalker:
    """:func:`verify_chain` one entry at a time, so a long export is checked while it streams.

    ``prev_hash``, ``position`` and ``dataset`` let a walk resume after entries already checked
    (the hash of the last one, how many there were, their dataset); the defaults start at
    genesis. ``strict_json=True`` promises that every entry comes from :func:`loads_strict`
    (floats refused while parsing), so hashing skips the float walk.
    """

    __slots__ = ("_hash", "dataset", "position", "prev_hash", "strict_json")

    def __init__(
        self,
        prev_hash: str = GENESIS_HASH,
        position: int = 0,
        dataset: object = None,
        *,
        strict_json: bool = False,
    ) -> None:
        self.prev_hash = prev_hash
        self.position = position
        self.dataset = dataset
        self.strict_json = strict_json
        self._hash = parsed_entry_hash if strict_json else entry_hash

    def check(self, entry: Mapping[str, Any]) -> list[ChainProblem]:
        """The defects of the next entry (empty if it links and hashes correctly)."""
        self.position += 1
        position = self.position
        problems: list[ChainProblem] = []
        seq = entry.get("seq")
        missing = (
            []
            if entry.keys() >= _REQUIRED_FIELDS
            else [f for f in _REQUIRED_ORDER if f not in entry]
        )
        if missing:
            problems.append(ChainProblem(position, seq, f"missing field(s): {', '.join(missing)}"))
        if seq != position:
            problems.append(ChainProblem(position, seq, f"seq {seq!r} where {position} expected"))
        if position == 1:
            self.dataset = entry.get("dataset_id")
        elif entry.get("dataset_id") != self.dataset:
            problems.append(ChainProblem(position, seq, "entry belongs to another dataset"))
        if entry.get("prev_hash") != self.prev_hash:
            problems.append(
                ChainProblem(position, seq, "prev_hash does not link to the previous entry")
            )
        try:
            recomputed = self._hash(entry)
        except (TypeError, ValueError) as exc:
            problems.append(ChainProblem(position, seq, f"cannot encode entry: {exc}"))
            recomputed = ""
        if entry.get("hash") != recomputed:
            problems.append(ChainProblem(position, seq, "hash does not match the entry's content"))
        self.prev_hash = str(entry.get("hash"))
        return problems


def verify_chain(entries: Iterable[Mapping[str, Any]]) -> list[ChainProblem]:
    """Check that entries form one gapless chain from genesis: fields present, ``seq`` = 1, 2,
    …, each ``prev_hash`` the previous ``hash``, each ``hash`` recomputed, one dataset."""
    walker = ChainWalker()
    problems: list[ChainProblem] = []
    for entry in entries:
        problems.extend(walker.check(entry))
    return problems
