"""The ledger: paged, filtered, streamed as JSON, CSV or JSON lines; or a whole export file
(``export=true``), written by the core's one writer of the export formats. And proofs over its
Merkle tree (``/proof``, ``/consistency``: :mod:`app.services.proofs`), for whoever may read
it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse

from app.api.deps import QUERY_INTEGER, ReportReaderDep
from app.api.errors import responses
from app.api.jsonbody import ExactJsonRoute
from app.api.reads import Reader, ReadsDep
from app.db.repositories import LedgerFilter
from app.schemas._types import JSONObject
from app.schemas.ledger import (
    ConsistencyProofOut,
    EntryKind,
    InclusionProofOut,
    LedgerPageOut,
    TreeHeadOut,
    ledger_time,
)
from app.schemas.shown import AmountText, amounts_shown
from app.services import ledger as service
from app.services import proofs
from odometer_core.ledger.formats import export_chunks, json_page_chunks

router = APIRouter(
    prefix="/v1/datasets/{dataset_id}/ledger", tags=["ledger"], route_class=ExactJsonRoute
)

MEDIA_TYPES = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
}
#: The export's head: an export holds the entries up to this ``seq`` (with ``after_seq=0`` and
#: no filter, exactly this many, ``seq`` 1 to the head).
HEAD_SEQ_HEADER = "Ledger-Head-Seq"


@router.get(
    "",
    name="read_ledger",
    response_model=LedgerPageOut,
    responses={
        200: {
            "description": (
                "A page of entries (JSON document, CSV with one row per entry, or JSON lines); "
                "with export=true, the export file of every entry after after_seq up to the "
                "head (json: {dataset_id, entries, head}), its head in the Ledger-Head-Seq "
                "header; the file ends with that head, signed by the checkpoint key (unsigned "
                "on a server without one: docs/ledger.md, the export's signed end)"
            ),
            "content": {
                "text/csv": {"schema": {"type": "string"}},
                "application/x-ndjson": {"schema": {"type": "string"}},
            },
        },
        **responses(401, 403, 404, 422, 503),
    },
)
def read_ledger(
    dataset_id: str,
    principal: ReportReaderDep,
    read: ReadsDep,
    after_seq: Annotated[
        int,
        Query(ge=0, le=2**62, description="cursor: entries with seq > this"),
        QUERY_INTEGER,
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=100_000), QUERY_INTEGER] = 100,
    since: Annotated[
        datetime | None, Query(description="entries at or after (UTC if naive)")
    ] = None,
    until: Annotated[datetime | None, Query(description="entries strictly before")] = None,
    actor: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    kind: Annotated[list[EntryKind] | None, Query(max_length=8)] = None,
    format: Annotated[Literal["json", "csv", "jsonl"], Query()] = "json",
    export: Annotated[
        bool,
        Query(
            description="the whole ledger after after_seq up to the head, as an export file "
            "(limit does not apply)"
        ),
    ] = False,
) -> StreamingResponse:
    """Ledger entries in ``seq`` order, exactly as hashed (verifiable offline)."""
    if since is not None and until is not None and ledger_time(until) <= ledger_time(since):
        # an empty window is a mistake in the request, not an empty answer
        raise RequestValidationError(
            [
                {
                    "loc": ("query", "until"),
                    "msg": "until must be later than since",
                    "type": "value_error",
                }
            ]
        )
    query = service.LedgerQuery(
        after_seq=after_seq,
        limit=2**62 if export else limit,  # the service stops at the head
        where=LedgerFilter(
            since=ledger_time(since) if since else None,
            until=ledger_time(until) if until else None,
            actor=actor,
            kinds=tuple(kind or ()),
        ),
    )
    # the page's batches are read as it streams, from the database that read its head; a
    # replica lost mid-stream hands the rest to the primary (read.fallback)
    page = read(
        lambda uow: service.read_ledger(uow, principal, dataset_id, query, fallback=read.fallback),
        dataset=dataset_id,
    )
    if format == "json" and not export:
        return StreamingResponse(
            _page_chunks(page),
            media_type=MEDIA_TYPES[format],
            headers=read.headers(),
        )
    headers = {
        "Content-Disposition": f'attachment; filename="{dataset_id}-ledger.{format}"',
        **read.headers(),
    }
    if export:
        headers[HEAD_SEQ_HEADER] = str(page.head_seq)
    return StreamingResponse(
        # an export file ends with the dataset's head, signed (docs/ledger.md)
        export_chunks(page.dataset_id, page, format, page.closing_head if export else None),
        media_type=MEDIA_TYPES[format],
        headers=headers,
    )


def _page_chunks(page: service.LedgerPage) -> Iterator[str]:
    """A page's JSON document, streamed, closed by ``shown``: each entry's charge and refund
    as pages print them, by seq (app/schemas/shown.py; an entry is hashed as it is)."""
    texts: dict[str, dict[str, AmountText]] = {}

    def entries() -> Iterator[JSONObject]:
        for entry in page:
            found = amounts_shown(charge=entry.get("charge"), refund=entry.get("refund"))
            if found:
                texts[str(entry["seq"])] = found
            yield entry

    return json_page_chunks(
        page.dataset_id,
        page.head_seq,
        entries(),
        lambda: page.next_after_seq,
        trailing=lambda: {"shown": texts},
    )


def _head(head: proofs.TreeHead) -> TreeHeadOut:
    return TreeHeadOut(size=head.size, root=head.root.hex())


def _rendered(body: InclusionProofOut | ConsistencyProofOut, read: Reader) -> Response:
    """A proof's answer as FastAPI renders its response model (the same JSON), with the read's
    headers. The body was validated when it was built: returned as a model, it would be
    validated again, in a second trip to the thread pool, a share of a proof's CPU comparable
    to the proof's own (``benchmarks/RESULTS.md``, *Proofs at 10⁶ entries*)."""
    return Response(body.model_dump_json(), media_type="application/json", headers=read.headers())


@router.get(
    "/proof",
    name="ledger_inclusion_proof",
    response_model=InclusionProofOut,
    responses=responses(401, 403, 404, 422, 503),
)
def inclusion_proof(
    dataset_id: str,
    principal: ReportReaderDep,
    read: ReadsDep,
    seq: Annotated[int, Query(ge=1, le=2**62, description="the entry to prove"), QUERY_INTEGER],
    size: Annotated[
        int | None,
        Query(
            ge=1,
            le=2**62,
            description="the tree of the first `size` entries (default: the head); seq <= size",
        ),
        QUERY_INTEGER,
    ] = None,
) -> Response:
    """The inclusion proof of entry ``seq`` in the ledger's Merkle tree of its first ``size``
    entries (RFC 9162 section 2.1.3), with that tree's head: 422 when ``seq > size`` or
    ``size`` is past the head. Checked offline with the entry's hash and the root alone."""
    made = read(
        lambda uow: proofs.inclusion_proof(uow, principal, dataset_id, seq, size),
        dataset=dataset_id,
    )
    body = InclusionProofOut(
        dataset_id=made.dataset_id,
        head_seq=made.head_seq,
        seq=made.seq,
        entry_hash=made.entry_hash,
        tree=_head(made.tree),
        proof=[h.hex() for h in made.path],
    )
    return _rendered(body, read)


@router.get(
    "/consistency",
    name="ledger_consistency_proof",
    response_model=ConsistencyProofOut,
    responses=responses(401, 403, 404, 422, 503),
)
def consistency_proof(
    dataset_id: str,
    principal: ReportReaderDep,
    read: ReadsDep,
    old: Annotated[
        int,
        Query(alias="from", ge=0, le=2**62, description="the older tree's size"),
        QUERY_INTEGER,
    ],
    new: Annotated[
        int | None,
        Query(
            alias="to",
            ge=0,
            le=2**62,
            description="the newer tree's size (default: the head); from <= to",
        ),
        QUERY_INTEGER,
    ] = None,
) -> Response:
    """The consistency proof that the ledger's Merkle tree of its first ``from`` entries is a
    prefix of its tree of the first ``to`` (RFC 9162 section 2.1.4), with both trees' heads:
    422 when ``from > to`` or ``to`` is past the head."""
    made = read(
        lambda uow: proofs.consistency_proof(uow, principal, dataset_id, old, new),
        dataset=dataset_id,
    )
    body = ConsistencyProofOut(
        dataset_id=made.dataset_id,
        head_seq=made.head_seq,
        old=_head(made.old),
        new=_head(made.new),
        proof=[h.hex() for h in made.path],
    )
    return _rendered(body, read)
