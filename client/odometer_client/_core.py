"""What the sync and async clients share: request building, the retry policy and response
decoding. Transport lives in the client classes (``_async/client.py``, and
``_sync/client.py`` generated from it).

The server is the judge of a request: a body it refuses is a 422 naming the field and the
rule, raised as :class:`~odometer_client.errors.InvalidRequest`. The client checks only what
is its own to say before sending: the shape of its own arguments (``blocks``, ``settle``'s
cell or output, a page's size) and a budget's amounts, whose domain it states (so that
``odometer datasets create --epsilon -1`` says the rule it breaks without a round trip)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Any, Final, Generic, Literal, TypeVar

import httpx

from odometer_client._bodies import (
    BudgetChangeBody,
    CapacityBody,
    CapBody,
    DatasetBody,
    GrantBody,
    InvocationBody,
    JSONNumber,
    PrincipalBody,
    SettleBody,
)
from odometer_client.declarations import Mechanism
from odometer_client.errors import ApiError, InvalidRequest, OdometerError, error_for
from odometer_client.exports import EXPORT_FORMATS, ExportFormat
from odometer_client.models import (
    BlockKey,
    BlocksChanged,
    BlocksPage,
    Dataset,
    Invocation,
    PreviewResult,
    Settlement,
)
from odometer_client.results import (
    CapCapacity,
    Grant,
    GrantCreated,
    IssuedKey,
    LedgerEntry,
    LedgerRecovered,
    Me,
    Organisation,
    OrganisationReport,
    Principal,
    Report,
    RevokedKey,
    WitnessState,
)
from odometer_client.shapes import Declaration

T = TypeVar("T")

#: What an amount may be given as: exact ``Decimal``, ``int``, decimal text, or ``float``
#: (read through its shortest ``repr``, as the server does).
Number = Decimal | int | float | str
#: A mechanism: a declaration (see :mod:`odometer_client.declarations`) or its JSON form.
MechanismLike = Mechanism | Mapping[str, Any]
#: The blocks an invocation on a partitioned dataset reads: ``{"from": KEY, "to": KEY}``,
#: ``{"keys": [KEY, …]}``, ``{"ranges": [{"from", "to"}, …]}``, or ``"all"`` (every open block).
BlocksLike = Mapping[str, Any] | Literal["all"]

DEFAULT_URL = "http://127.0.0.1:8000"
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: Retried responses: the server could not work (5xx), a concurrent duplicate of the same
#: idempotency key is still in flight (409 ``IdempotencyConflict``), or a concurrent change
#: made the server roll the request back (409 ``ConcurrentUpdate``: nothing was applied).
#: Never any other 4xx.
RETRY_STATUSES = frozenset({500, 502, 503, 504})
RETRY_ERROR_CODES = frozenset({"IdempotencyConflict", "ConcurrentUpdate"})


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter (``retries`` extra attempts). A
    retried answer's ``Retry-After`` (seconds; the service sends it with every 503) is waited
    for when it is longer than the backoff, up to ``max_retry_after`` seconds (0: ignored), so
    that the retries of a registration outlast what the server said it needs, e.g. a database
    failover (``docs/operations.md``); raise ``retries`` to outlast longer ones."""

    retries: int = 3
    backoff: float = 0.1
    max_backoff: float = 2.0
    max_retry_after: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        base: float = min(self.max_backoff, self.backoff * (2**attempt))
        backoff = base * (0.5 + random.random() / 2)
        if retry_after is None:
            return backoff
        return max(backoff, min(retry_after, self.max_retry_after))


def retry_after(response: httpx.Response | None) -> float | None:
    """A response's ``Retry-After`` in seconds (the delay form; a date or junk: none)."""
    if response is None:
        return None
    try:
        seconds = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None
    return seconds if 0 <= seconds < 86_400 else None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP call: how to send it, whether a resend is safe, how to read the answer.

    ``resend``: ``"always"`` (reads, idempotency-keyed or naturally idempotent writes) or
    ``"unsent"`` (only when the connection failed before the request could reach the server).
    """

    method: str
    path: str
    decode: Callable[[Any], T]
    #: The request's JSON body (one of :mod:`odometer_client._bodies`' shapes).
    body: Mapping[str, object] | None = None
    params: list[tuple[str, str]] = field(default_factory=list)
    idempotency_key: str | None = None
    resend: Literal["always", "unsent"] = "always"
    #: the answer carries the receipt of the ledger entry it wrote (a registration's, a
    #: settle's, a cancel's): the client's receipt store keeps it
    receipt: bool = False

    def headers(self) -> dict[str, str]:
        return {IDEMPOTENCY_HEADER: self.idempotency_key} if self.idempotency_key else {}


async def asleep(seconds: float) -> None:
    """The asynchronous client's pause between retries (``sleep`` in the generated one)."""
    await asyncio.sleep(seconds)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def resolve(base_url: str | None, api_key: str | None) -> tuple[str, str]:
    url = base_url or os.environ.get("ODOMETER_URL") or DEFAULT_URL
    key = api_key or os.environ.get("ODOMETER_API_KEY") or ""
    return url.rstrip("/"), key


def new_key(given: str | None) -> str:
    return given or str(uuid.uuid4())


def dataset_id(dataset: str | Dataset) -> str:
    return dataset.id if isinstance(dataset, Dataset) else dataset


def invocation_id(invocation: str | Invocation) -> str:
    return invocation.id if isinstance(invocation, Invocation) else invocation


def _refuse(problems: list[str]) -> None:
    """Refuse a request before it is sent (a 422 ``ValidationError`` marked ``client_side``)."""
    if problems:
        raise InvalidRequest(
            422,
            {
                "error": "ValidationError",
                "detail": f"refused before sending: {'; '.join(problems)}",
                "client_side": True,
            },
        )


#: A budget's amounts, as the server reads them (docs/http-api.md, *Numbers*): ε in (0, 10⁶],
#: δ in [0, 1), as a JSON number or decimal text. A dataset's budget, a budget change and an
#: organisation's cap share the domain.
MAX_EPSILON = Decimal(1_000_000)
_DOMAINS = {
    "epsilon": '0 < ε ≤ 10⁶: an exact decimal, as a JSON number or as decimal text such as "1"',
    "delta": '0 ≤ δ < 1: an exact decimal, as a JSON number or as decimal text such as "1e-6"',
}
#: Decimal text, a sign allowed (a negative amount is then told the bound it breaks).
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _budget_problems(where: str, epsilon: Number, delta: Number) -> list[str]:
    """What is wrong with a budget's (ε, δ), each as ``{where}.epsilon: must be > 0, got -1``;
    the finer grammar (digits, exponents) is the server's to judge."""
    problems = []
    for unit, value in (("epsilon", epsilon), ("delta", delta)):
        number = _as_number(value)
        shown = json.dumps(str(value) if isinstance(value, Decimal) else value)
        if number is None:
            problems.append(f"{where}.{unit}: {shown} is not an amount ({_DOMAINS[unit]})")
        elif unit == "epsilon" and number <= 0:
            problems.append(f"{where}.epsilon: must be > 0, got {shown}")
        elif unit == "epsilon" and number > MAX_EPSILON:
            problems.append(f"{where}.epsilon: must be at most {MAX_EPSILON}, got {shown}")
        elif unit == "delta" and number < 0:
            problems.append(f"{where}.delta: must be ≥ 0, got {shown}")
        elif unit == "delta" and number >= 1:
            problems.append(f"{where}.delta: must be < 1, got {shown}")
    return problems


def _as_number(value: Any) -> Decimal | None:
    """An amount as the exact decimal it is written as; ``None`` if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return Decimal(repr(value)) if math.isfinite(value) else None
    if isinstance(value, int | Decimal):
        number = Decimal(value)
        return number if number.is_finite() else None
    if isinstance(value, str) and len(value) <= 64 and _NUMBER_TEXT.fullmatch(value):
        return Decimal(value)
    return None


#: The forms of a selection of blocks (:data:`BlocksLike`).
_SELECTIONS = ({"from", "to"}, {"keys"}, {"ranges"})


def _blocks_problems(blocks: BlocksLike) -> list[str]:
    """What is wrong with the shape of a selection of blocks (its keys are the server's to
    judge)."""
    if blocks == "all":
        return []
    if isinstance(blocks, Mapping) and set(blocks) in _SELECTIONS:
        listed = blocks.get("keys", blocks.get("ranges"))
        if listed is None or (isinstance(listed, list | tuple) and listed):
            return []
    shown = json.dumps(_jsonable(blocks), default=str)
    return [
        f"$.blocks: {shown[:60]} is not a selection of blocks: give "
        '{"from": KEY, "to": KEY}, {"keys": [KEY, …]}, {"ranges": [{"from", "to"}, …]} '
        'or "all"'
    ]


def _amount_text(value: Number) -> JSONNumber:
    """Decimals travel as decimal strings (floats and ints pass as JSON numbers)."""
    return str(value) if isinstance(value, Decimal) else value


def mechanism_json(mechanism: MechanismLike) -> Declaration:
    if isinstance(mechanism, Mechanism):
        return mechanism.to_json()
    return dict(mechanism)


# ---------------------------------------------------------------------------- calls
def create_dataset(
    name: str,
    epsilon: Number,
    delta: Number,
    relation: str,
    accounting: Mapping[str, Any] | None,
    idempotency_key: str | None,
    partition: Mapping[str, Any] | None = None,
) -> Call[Dataset]:
    data: DatasetBody = {
        "name": name,
        "budget": {"epsilon": _amount_text(epsilon), "delta": _amount_text(delta)},
        "relation": relation,
    }
    if accounting is not None:
        data["accounting"] = _jsonable(accounting)
    if partition is not None:
        data["partition"] = _jsonable(partition)
    return Call(
        "POST",
        "/v1/datasets",
        Dataset.from_json,
        body=_checked(_budget_problems("$.budget", epsilon, delta), data),
        idempotency_key=new_key(idempotency_key),
        resend="unsent",  # dataset creation is not idempotency-keyed on the server
    )


def list_datasets(limit: int, offset: int) -> Call[tuple[list[Dataset], int | None]]:
    def decode(obj: Any) -> tuple[list[Dataset], int | None]:
        return [Dataset.from_json(d) for d in obj["datasets"]], obj.get("next_offset")

    return Call(
        "GET", "/v1/datasets", decode, params=[("limit", str(limit)), ("offset", str(offset))]
    )


def get_dataset(ds: str) -> Call[Dataset]:
    return Call("GET", f"/v1/datasets/{ds}", Dataset.from_json)


def change_budget(
    ds: str,
    epsilon: Number,
    delta: Number,
    sub_budget: str | None,
    final_conversion_delta: Number | None,
    idempotency_key: str | None,
) -> Call[Dataset]:
    data: BudgetChangeBody = {"epsilon": _amount_text(epsilon), "delta": _amount_text(delta)}
    if sub_budget is not None:
        data["sub_budget"] = sub_budget
    if final_conversion_delta is not None:
        data["final_conversion_delta"] = _amount_text(final_conversion_delta)
    return Call(
        "PATCH",
        f"/v1/datasets/{ds}/budget",
        Dataset.from_json,
        body=_checked(_budget_problems("$", epsilon, delta), data),
        idempotency_key=new_key(idempotency_key),
        resend="always",  # sets absolute values: a resend has the same outcome
    )


def _invocation_body(
    mechanism: MechanismLike,
    sub_budget: str | None,
    conversion_delta: Number | None,
    blocks: BlocksLike | None = None,
    contribution: str | None = None,
    neighbours: str | None = None,
) -> InvocationBody:
    data: InvocationBody = {"mechanism": mechanism_json(mechanism)}
    if sub_budget is not None:
        data["sub_budget"] = sub_budget
    if conversion_delta is not None:
        data["conversion_delta"] = _amount_text(conversion_delta)
    if blocks is not None:
        data["blocks"] = blocks if isinstance(blocks, str) else _jsonable(blocks)
    if contribution is not None:
        data["contribution"] = contribution
    if neighbours is not None:
        data["neighbours"] = neighbours
    return _checked(_blocks_problems(blocks) if blocks is not None else [], data)


def register(
    ds: str,
    mechanism: MechanismLike,
    sub_budget: str | None,
    conversion_delta: Number | None,
    idempotency_key: str | None,
    blocks: BlocksLike | None = None,
    contribution: str | None = None,
    neighbours: str | None = None,
) -> Call[Invocation]:
    return Call(
        "POST",
        f"/v1/datasets/{ds}/invocations",
        Invocation.from_json,
        body=_invocation_body(
            mechanism, sub_budget, conversion_delta, blocks, contribution, neighbours
        ),
        idempotency_key=new_key(idempotency_key),
        receipt=True,
    )


def preview(
    ds: str,
    mechanism: MechanismLike,
    sub_budget: str | None,
    conversion_delta: Number | None,
    blocks: BlocksLike | None = None,
    contribution: str | None = None,
    neighbours: str | None = None,
) -> Call[PreviewResult]:
    return Call(
        "POST",
        f"/v1/datasets/{ds}/invocations/preview",
        PreviewResult.from_json,
        body=_invocation_body(
            mechanism, sub_budget, conversion_delta, blocks, contribution, neighbours
        ),
    )


# ---------------------------------------------------------------------------- blocks
def change_blocks(
    ds: str, action: Literal["open", "retire"], first: BlockKey, last: BlockKey
) -> Call[BlocksChanged]:
    """Open or retire blocks ``first`` … ``last`` (a ledger entry). Not idempotency-keyed on
    the server, and opening twice is refused (``BlockConflict``): never sent twice."""
    body = _jsonable({action: {"from": first, "to": last}})
    return Call(
        "POST", f"/v1/datasets/{ds}/blocks", BlocksChanged.from_json, body=body, resend="unsent"
    )


#: The most runs one page of ``GET …/blocks`` holds.
MAX_BLOCKS_PAGE = 1000


def list_blocks(
    ds: str, first: BlockKey | None, last: BlockKey | None, limit: int
) -> Call[BlocksPage]:
    if not 1 <= limit <= MAX_BLOCKS_PAGE:  # the route's bound on its query
        _refuse([f"limit: must be 1 … {MAX_BLOCKS_PAGE}, got {limit}"])
    params = [("limit", str(limit))]
    if first is not None:
        params.append(("from", str(first)))
    if last is not None:
        params.append(("to", str(last)))
    return Call("GET", f"/v1/datasets/{ds}/blocks", BlocksPage.from_json, params=params)


class _NoOutput(Enum):
    """The type of :data:`NO_OUTPUT`."""

    NO_OUTPUT = "no output"


#: ``settle(..., output=...)`` not given: ``None`` is an output (⊥, a refused PTR).
NO_OUTPUT: Final = _NoOutput.NO_OUTPUT


def settle(
    ds: str, inv: str, cell: str | None, output: Any, idempotency_key: str | None
) -> Call[Settlement]:
    body: SettleBody = {}
    if cell is not None:
        body["cell"] = cell
    if output is not NO_OUTPUT:
        body["output"] = output
    if not body:
        raise InvalidRequest(
            422,
            {
                "error": "ValidationError",
                "detail": "refused before sending: give the cell, the released output, or both",
                "client_side": True,
            },
        )
    return Call(
        "POST",
        f"/v1/datasets/{ds}/invocations/{inv}/settle",
        Settlement.from_json,
        body=_jsonable(body),
        idempotency_key=new_key(idempotency_key),
        receipt=True,
    )


def cancel(ds: str, inv: str, idempotency_key: str | None) -> Call[Settlement]:
    return Call(
        "POST",
        f"/v1/datasets/{ds}/invocations/{inv}/cancel",
        Settlement.from_json,
        idempotency_key=new_key(idempotency_key),
        receipt=True,
    )


def get_invocation(ds: str, inv: str) -> Call[Invocation]:
    return Call("GET", f"/v1/datasets/{ds}/invocations/{inv}", Invocation.from_json)


def grant(
    ds: str, principal_id: str, quota: Mapping[str, Number] | None, idempotency_key: str | None
) -> Call[GrantCreated]:
    body: GrantBody = {"principal_id": principal_id}
    if quota is not None:
        body["quota"] = {k: _amount_text(v) for k, v in quota.items()}
    return Call(
        "POST",
        f"/v1/datasets/{ds}/grants",
        GrantCreated.from_json,
        body=body,
        idempotency_key=new_key(idempotency_key),
        resend="unsent",
    )


def list_grants(ds: str) -> Call[list[Grant]]:
    return Call("GET", f"/v1/datasets/{ds}/grants", _listed("grants", Grant.from_json))


def revoke_grant(ds: str, principal_id: str) -> Call[Grant]:
    return Call("DELETE", f"/v1/datasets/{ds}/grants/{principal_id}", Grant.from_json)


# ---------------------------------------------------------------------------- tenancy
def list_organisations() -> Call[list[Organisation]]:
    return Call("GET", "/v1/organisations", _listed("organisations", Organisation.from_json))


def create_organisation(name: str) -> Call[Organisation]:
    return Call(
        "POST",
        "/v1/organisations",
        Organisation.from_json,
        body={"name": name},
        resend="unsent",  # not idempotency-keyed on the server: never sent twice
    )


def set_organisation_cap(
    organisation_id: str,
    epsilon: Number | None,
    delta: Number | None,
    accounting: Mapping[str, Any] | None = None,
    replace: bool = False,
) -> Call[Organisation]:
    """The organisation's cap (ε, δ) in ``accounting``'s mode (``{"mode": "zcdp", …}``, a
    dataset's leaf accounting; default basic); no amounts removes it (sets absolute values,
    so a resend has the same outcome). ``replace``: replace a cap that has counted by this one,
    in any mode, its reading kept as a closed statement (a resend closes nothing more: the new
    cap has counted nothing)."""
    if (epsilon is None) != (delta is None):
        raise ValueError("give both epsilon and delta of the cap, or neither to remove it")
    body: CapBody | None = None
    if epsilon is not None and delta is not None:
        data: CapBody = {"epsilon": _amount_text(epsilon), "delta": _amount_text(delta)}
        if accounting is not None:
            data["accounting"] = accounting
        if replace:
            data["replace"] = True
        body = _checked(_budget_problems("$", epsilon, delta), data)
    elif accounting is not None:
        raise ValueError("an accounting mode needs the cap's epsilon and delta")
    elif replace:
        raise ValueError("a replacement needs the new cap's epsilon and delta")
    return Call(
        "PATCH", f"/v1/organisations/{organisation_id}/cap", Organisation.from_json, body=body
    )


def organisation_cap_capacity(
    organisation_id: str,
    mechanism: MechanismLike,
    ds: str | None,
    conversion_delta: Number | None,
) -> Call[CapCapacity]:
    """How many more of ``mechanism`` the cap admits (a question: nothing is written, so a
    resend is safe), under dataset ``ds``'s relation."""
    data: CapacityBody = {"mechanism": mechanism_json(mechanism)}
    if ds is not None:
        data["dataset_id"] = ds
    if conversion_delta is not None:
        data["conversion_delta"] = _amount_text(conversion_delta)
    body = _jsonable(data)
    path = f"/v1/organisations/{organisation_id}/cap/capacity"
    return Call("POST", path, CapCapacity.from_json, body=body)


def organisation_report(organisation_id: str) -> Call[OrganisationReport]:
    path = f"/v1/organisations/{organisation_id}/report"
    return Call("GET", path, OrganisationReport.from_json)


def whoami() -> Call[Me]:
    return Call("GET", "/v1/me", Me.from_json)


def witness() -> Call[WitnessState]:
    return Call("GET", "/v1/witness", WitnessState.from_json)


def check_witness() -> Call[WitnessState]:
    return Call("POST", "/v1/witness/check", WitnessState.from_json, body={})


def import_ledger_tail(
    dataset_id: str, entries: Sequence[Mapping[str, Any]]
) -> Call[LedgerRecovered]:
    """``entries``: ledger entries as exported (``LedgerEntry.raw``, an export's lines), sent as
    they are: the server checks that they chain."""
    path = f"/v1/datasets/{dataset_id}/witness/import"
    return Call("POST", path, LedgerRecovered.from_json, body={"entries": list(entries)})


def acknowledge_ledger_loss(dataset_id: str, reason: str) -> Call[LedgerRecovered]:
    path = f"/v1/datasets/{dataset_id}/witness/acknowledge"
    body = {"reason": reason}
    return Call("POST", path, LedgerRecovered.from_json, body=body, resend="unsent")


def list_principals() -> Call[list[Principal]]:
    return Call("GET", "/v1/principals", _listed("principals", Principal.from_json))


def create_principal(name: str, role: str, organisation_id: str | None) -> Call[Principal]:
    data: PrincipalBody = {"name": name, "role": role}
    if organisation_id is not None:
        data["organisation_id"] = organisation_id
    return Call(
        "POST",
        "/v1/principals",
        Principal.from_json,
        body=data,
        resend="unsent",
    )


def issue_key(principal_id: str, expires_at: str | None) -> Call[IssuedKey]:
    body = None if expires_at is None else {"expires_at": expires_at}
    return Call(
        "POST",
        f"/v1/principals/{principal_id}/keys",
        IssuedKey.from_json,
        body=body,
        resend="unsent",
    )


def revoke_key(key_id: str) -> Call[RevokedKey]:
    return Call("DELETE", f"/v1/keys/{key_id}", RevokedKey.from_json)


def _listed(key: str, read: Callable[[Any], T]) -> Callable[[Any], list[T]]:
    """The items of a list document (``{"grants": [...]}``), each read by ``read``."""

    def decode(obj: Any) -> list[T]:
        return [read(item) for item in obj[key]]

    return decode


@dataclass(frozen=True)
class LedgerQuery:
    after_seq: int = 0
    page_size: int = 1000
    since: str | None = None
    until: str | None = None
    actor: str | None = None
    kinds: tuple[str, ...] = ()


def ledger_page(
    ds: str, q: LedgerQuery, after_seq: int
) -> Call[tuple[list[LedgerEntry], int | None]]:
    params = [("after_seq", str(after_seq)), ("limit", str(q.page_size))]
    for name in ("since", "until", "actor"):
        value = getattr(q, name)
        if value is not None:
            params.append((name, value))
    params.extend(("kind", k) for k in q.kinds)

    def decode(obj: Any) -> tuple[list[LedgerEntry], int | None]:
        return [LedgerEntry.from_json(e) for e in obj["entries"]], obj.get("next_after_seq")

    return Call("GET", f"/v1/datasets/{ds}/ledger", decode, params=params)


#: The header of an export response: the ``seq`` of the last entry it holds.
EXPORT_HEAD_HEADER = "Ledger-Head-Seq"


def export_ledger(ds: str, format: ExportFormat) -> Call[None]:
    """``GET …/ledger?export=true``: the whole ledger as one export file, written by the
    server (the client saves the bytes; ``decode`` is not used)."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}")
    params = [("export", "true"), ("format", format)]
    return Call("GET", f"/v1/datasets/{ds}/ledger", lambda _: None, params=params)


def exported_count(response: httpx.Response) -> int:
    """How many entries an export response holds: the whole ledger, ``seq`` 1 to its head."""
    head = response.headers.get(EXPORT_HEAD_HEADER)
    if head is None or not head.isdigit():
        raise OdometerError(
            f"the server answered no {EXPORT_HEAD_HEADER} header: it does not serve whole "
            "exports (GET …/ledger?export=true); use a server of the client's version"
        )
    return int(head)


def get_report(ds: str) -> Call[Report]:
    return Call("GET", f"/v1/datasets/{ds}/report", Report.from_json)


_Body = TypeVar("_Body", bound=Mapping[str, object])


def _checked(problems: list[str], data: _Body) -> _Body:
    """A request body as JSON (its decimals as text), unless ``problems`` refuse it before it
    is sent."""
    _refuse(problems)
    body: _Body = _jsonable(data)
    return body


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


# ---------------------------------------------------------------------------- responses
def retryable_response(response: httpx.Response, call: Call[Any]) -> bool:
    """5xx and duplicates in flight, for calls that are safe to resend (a non-keyed write
    that reached the server may have been applied before the error)."""
    if call.resend != "always":
        return False
    if response.status_code in RETRY_STATUSES:
        return True
    if response.status_code == 409:
        return _error_code(response) in RETRY_ERROR_CODES
    return False


def retryable_exception(exc: httpx.TransportError, call: Call[Any]) -> bool:
    """Transport failures are retried; for non-keyed writes only if nothing was sent."""
    if call.resend == "always":
        return True
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


def _error_code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("error") if isinstance(body, dict) else None


def decode(
    call: Call[T],
    response: httpx.Response,
    seen: SeenSeqs | None = None,
    keep: Callable[[Mapping[str, Any]], object] | None = None,
) -> T:
    """``call``'s answer, decoded (an error raised as its typed error); what it showed noted in
    ``seen``, and, for an answer that carries a receipt (:attr:`Call.receipt`), the answer
    handed to ``keep`` (the client's receipt store)."""
    if response.status_code >= 400:
        raise to_error(response)
    obj = response.json()
    if seen is not None:
        seen.note(response, obj)
    if keep is not None and call.receipt and isinstance(obj, Mapping):
        keep(obj)
    return call.decode(obj)


# ---------------------------------------------------------------------------- read replicas
#: Sent with every read: the highest ledger seq this client has been shown of each dataset, so
#: that a server reading from a replica never answers with less (docs/operations.md, *Read
#: replicas*: read-your-writes and monotonic reads).
MIN_SEQ_HEADER = "Odometer-Min-Seq"
#: Answered with a dataset's read: that dataset's head where the answer was read.
SEQ_HEADER = "Odometer-Seq"
#: The most datasets one request lists (the server's bound), the most recently shown first.
MAX_MIN_SEQS = 64
_DATASET_PATH = re.compile(r"^/v1/datasets/([^/?]+)")


def _pairs(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        dataset, _, seq = item.strip().rpartition(":")
        if dataset and seq.isdigit():
            out.append((dataset, int(seq)))
    return out


class SeenSeqs:
    """The highest ledger seq of each dataset a client has been shown: by a write's answer
    (``dataset_id`` and ``ledger_seq``), a dataset's (``id`` and ``ledger.last_seq``, alone or
    in a list) or a read's ``Odometer-Seq`` header. A read of one dataset sends that dataset's
    (``Odometer-Min-Seq: <dataset>:<seq>``), any other read the most recent
    :data:`MAX_MIN_SEQS`."""

    def __init__(self) -> None:
        self._seqs: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, dataset: str) -> int | None:
        return self._seqs.get(dataset)

    def headers(self, call: Call[Any]) -> dict[str, str]:
        """``call``'s headers, with what this client has shown when it is a read."""
        headers = call.headers()
        if call.method != "GET":
            return headers
        with self._lock:
            match = _DATASET_PATH.match(call.path)
            if match is not None:
                seq = self._seqs.get(match.group(1))
                listed = [] if seq is None else [(match.group(1), seq)]
            else:
                listed = list(self._seqs.items())[-MAX_MIN_SEQS:]
        if listed:
            headers[MIN_SEQ_HEADER] = ", ".join(f"{d}:{s}" for d, s in listed)
        return headers

    def note(self, response: httpx.Response, obj: Any) -> None:
        """Add what ``response`` (its body read as ``obj``) showed."""
        found = _pairs(response.headers.get(SEQ_HEADER, ""))
        items = obj.get("datasets") if isinstance(obj, dict) else None
        for item in [obj, *(items if isinstance(items, list) else [])]:
            if not isinstance(item, dict):
                continue
            seq, ledger = item.get("ledger_seq"), item.get("ledger")
            if isinstance(seq, int) and isinstance(item.get("dataset_id"), str):
                found.append((item["dataset_id"], seq))
            elif (
                isinstance(ledger, dict)
                and isinstance(ledger.get("last_seq"), int)
                and isinstance(item.get("id"), str)
            ):
                found.append((item["id"], ledger["last_seq"]))
        if not found:
            return
        with self._lock:
            for dataset, seq in found:
                if seq > self._seqs.get(dataset, -1):
                    self._seqs.pop(dataset, None)  # most recently shown last
                    self._seqs[dataset] = seq


def to_error(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        body = None
    if not isinstance(body, dict):
        body = {"error": response.reason_phrase or "Error", "detail": response.text[:500]}
    return error_for(response.status_code, body)
