"""The read routes' dependency: the ``Odometer-Min-Seq`` header and the database that serves
the read (:mod:`app.services.reads`, which states the rule)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Final, TypeVar

from fastapi import Depends, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import WithJsonSchema

from app.db.uow import UnitOfWork
from app.services import reads
from app.services.reads import MIN_SEQ_HEADER, Reads, Served

T = TypeVar("T")

_ID: Final = r"[A-Za-z0-9_.\-]{1,64}"
_PAIR: Final = rf"\s*{_ID}:[0-9]{{1,18}}\s*"
#: ``<dataset>:<seq>`` pairs, comma-separated, at most :data:`app.services.reads.MAX_LISTED` of
#: them, each seq of at most 18 digits (below the 2^62 the service reads): the document's pattern
#: says all the header's rules, so a value it allows is never refused.
MIN_SEQ_PATTERN: Final = rf"^{_PAIR}(,{_PAIR}){{0,{reads.MAX_LISTED - 1}}}$"

#: The header's schema in the document: a string of pairs (a header is absent or a string, never
#: null: without this the document would offer ``null`` as a value, which a client can only send
#: as the text "null", refused by the pattern)
_MIN_SEQ_SCHEMA: Final = WithJsonSchema(
    {"type": "string", "maxLength": reads.MAX_LISTED * 90, "pattern": MIN_SEQ_PATTERN}
)

MinSeqHeader = Annotated[
    str | None,
    _MIN_SEQ_SCHEMA,
    Header(
        alias=MIN_SEQ_HEADER,
        max_length=reads.MAX_LISTED * 90,
        pattern=MIN_SEQ_PATTERN,
        description="The highest ledger seq the client has shown of each dataset, as "
        "`<dataset_id>:<seq>` pairs, comma-separated (at most 64; a seq of at most 18 "
        "digits). With a read "
        "replica, the read is served by the replica only once it holds every seq listed for "
        "the datasets read (the dataset in the path; for a list or an organisation's report, "
        "every dataset listed), waiting for it at most ODOMETER_READ_REPLICA_WAIT_SECONDS "
        "(0.25 s unless set); then by the primary. So a client sees its own writes, and never"
        " a reading older than one it has shown. The answer says where it came from "
        "(Odometer-Read-Source: replica or primary), a replica's its staleness in seconds "
        "(Odometer-Replica-Lag), a dataset's read the dataset's head at the database that "
        "answered, read after the answer (Odometer-Seq: <dataset_id>:<seq>), to add to what "
        "the client has shown",
    ),
]


class Reader:
    """One request's reads: served as :class:`~app.services.reads.Reads` decides, the answer's
    headers set on the route's response (or, for a response the route builds itself, handed
    to :meth:`headers_of`)."""

    def __init__(self, reads_: Reads, shown: dict[str, int], response: Response) -> None:
        self._reads = reads_
        self._shown = shown
        self._response = response
        self.served: Served[object] | None = None

    def __call__(self, work: Callable[[UnitOfWork], T], *, dataset: str | None = None) -> T:
        served = self._reads.serve(work, self._shown, dataset=dataset)
        self.served = served  # type: ignore[assignment]
        self._response.headers.update(served.headers())
        return served.value

    def fallback(self) -> UnitOfWork | None:
        """Where a streamed answer the replica began continues if the replica fails mid-stream:
        the primary (``None`` for an answer the primary served: nothing to move to)."""
        if self.served is None or self.served.source != "replica":
            return None
        return self._reads.moved()

    def headers(self) -> dict[str, str]:
        """The last answer's headers (for a response the route builds itself)."""
        return {} if self.served is None else self.served.headers()


async def get_reader(request: Request, response: Response, shown: MinSeqHeader = None) -> Reader:
    try:
        listed = reads.min_seqs(shown)
    except ValueError as exc:
        raise RequestValidationError(
            [{"loc": ("header", MIN_SEQ_HEADER), "msg": str(exc), "type": "value_error"}]
        ) from exc
    return Reader(request.app.state.reads, listed, response)


ReadsDep = Annotated[Reader, Depends(get_reader)]
