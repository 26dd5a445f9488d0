# Generated from odometer_client/_async/client.py by client/generate.py (unasync):
# do not edit; edit the asynchronous source and run `make client-generated`.
"""The client of the privacy odometer, written once for both flavours.

``_async/client.py`` is the asynchronous client (``httpx.AsyncClient``: ``await`` each call,
``async with client.reserve(...) as r``); ``_sync/client.py``, the synchronous one, is generated
from it by unasync (``make client-generated``; ``tests/client/test_unasync.py`` fails when the
committed file is stale). Edit the asynchronous source only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from functools import partial
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import httpx

from odometer_client import _core
from odometer_client._core import (
    BlocksLike,
    Call,
    LedgerQuery,
    MechanismLike,
    Number,
    RetryPolicy,
)
from odometer_client.errors import NotFound, ReservationNotSettled, TransportError
from odometer_client.exports import ExportFormat, format_of
from odometer_client.models import (
    BlockKey,
    BlockRun,
    BlocksChanged,
    BlocksPage,
    Dataset,
    Invocation,
    PreviewResult,
    Settlement,
)
from odometer_client.receipts import ReceiptStore, store_of
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

T = TypeVar("T")


class OdometerClient:
    """Typed client of the privacy odometer.

    ``base_url`` and ``api_key`` default to ``$ODOMETER_URL`` (else ``http://127.0.0.1:8000``)
    and ``$ODOMETER_API_KEY``. Mutating calls send an ``Idempotency-Key`` (a fresh uuid4
    unless given) and are retried with the *same* key on connection errors, timeouts and 5xx
    (``retry``: bounded, exponential backoff); 4xx answers are never retried. Amounts are
    ``Decimal`` in and out.

    ``receipts``: where the signed receipts of registrations, settlements and cancellations
    are kept (:mod:`odometer_client.receipts`): ``True`` (the default) the default store
    (``$ODOMETER_DATA_DIR/receipts.jsonl``, which ``odometer receipts`` lists), a path or a
    :class:`~odometer_client.receipts.ReceiptStore` another, ``False`` none. The store is
    :attr:`receipts` (``client.receipts.held(dataset)``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        http: httpx.Client | None = None,
        receipts: ReceiptStore | str | PathLike[str] | bool = True,
    ) -> None:
        url, key = _core.resolve(base_url, api_key)
        self.base_url = url
        self.retry = retry or RetryPolicy()
        #: the ledger seqs this client has been shown, sent with its reads (read replicas)
        self.seen = _core.SeenSeqs()
        #: where the receipts of its registrations, settlements and cancellations are kept
        self.receipts = store_of(receipts)
        self._keep = None if self.receipts is None else partial(self.receipts.keep, server=url)
        self._http = http or httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            transport=transport,
        )

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OdometerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    json=call.body,
                    params=tuple(call.params),
                    headers=self.seen.headers(call),
                )
            except httpx.TransportError as exc:
                if attempt >= self.retry.retries or not _core.retryable_exception(exc, call):
                    raise TransportError(f"{call.method} {call.path}: {exc!r}") from exc
            else:
                if attempt >= self.retry.retries or not _core.retryable_response(response, call):
                    return _core.decode(call, response, self.seen, self._keep)
            _core.sleep(self.retry.delay(attempt, _core.retry_after(response)))
            attempt += 1

    # ------------------------------------------------------------------ datasets
    def create_dataset(
        self,
        name: str,
        epsilon: Number,
        delta: Number,
        relation: str = "add_remove",
        accounting: Mapping[str, Any] | None = None,
        *,
        partition: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Dataset:
        """Create a dataset with budget (ε, δ); ``accounting`` e.g. ``{"mode": "rdp"}``.

        ``partition`` makes it a partitioned dataset, e.g. ``{"kind": "day", "unit":
        "record", "timezone": "Europe/Paris"}`` (kinds ``day``, ``week``, ``month`` with
        ``timezone``, ``bucket`` with ``buckets``, ``named`` with ``names``; ``unit`` what one
        block's budget protects, ``record`` or ``person``): (ε, δ) and ``accounting`` (a leaf
        mode) are then every block's; blocks are opened with :meth:`open_blocks`."""
        return self._send(
            _core.create_dataset(
                name, epsilon, delta, relation, accounting, idempotency_key, partition
            )
        )

    def list_datasets(self, *, page_size: int = 100) -> list[Dataset]:
        """Every dataset visible to the key (all pages)."""
        out: list[Dataset] = []
        offset: int | None = 0
        while offset is not None:
            page, offset = self._send(_core.list_datasets(page_size, offset))
            out.extend(page)
        return out

    def get_dataset(self, dataset: str | Dataset) -> Dataset:
        return self._send(_core.get_dataset(_core.dataset_id(dataset)))

    def change_budget(
        self,
        dataset: str | Dataset,
        epsilon: Number,
        delta: Number,
        *,
        sub_budget: str | None = None,
        final_conversion_delta: Number | None = None,
        idempotency_key: str | None = None,
    ) -> Dataset:
        """New target (ε, δ) (never below spent + reserved: ``Conflict`` BudgetBelowSpent)."""
        return self._send(
            _core.change_budget(
                _core.dataset_id(dataset),
                epsilon,
                delta,
                sub_budget,
                final_conversion_delta,
                idempotency_key,
            )
        )

    def grant(
        self,
        dataset: str | Dataset,
        principal_id: str,
        *,
        quota: Mapping[str, Number] | None = None,
        idempotency_key: str | None = None,
    ) -> GrantCreated:
        """Grant a principal access to a dataset, optionally with a quota (ε, δ)."""
        return self._send(
            _core.grant(_core.dataset_id(dataset), principal_id, quota, idempotency_key)
        )

    def grants(self, dataset: str | Dataset) -> list[Grant]:
        """The dataset's grants (principal, quota and what the quota has spent)."""
        return self._send(_core.list_grants(_core.dataset_id(dataset)))

    def revoke_grant(self, dataset: str | Dataset, principal_id: str) -> Grant:
        """Withdraw a principal's access to a dataset (its ledger history stays)."""
        return self._send(_core.revoke_grant(_core.dataset_id(dataset), principal_id))

    # ------------------------------------------------------------------ blocks
    def open_blocks(self, dataset: str | Dataset, first: BlockKey, last: BlockKey) -> BlocksChanged:
        """Open blocks ``first`` … ``last`` (keys, both included) of a partitioned dataset, on
        the public schedule the curator keeps; a block is opened once in its life (``Conflict``
        BlockConflict if any was opened before; ``InvalidRequest`` InvalidBlocks for a bad key
        or a dataset that is not partitioned)."""
        return self._send(_core.change_blocks(_core.dataset_id(dataset), "open", first, last))

    def retire_blocks(
        self, dataset: str | Dataset, first: BlockKey, last: BlockKey
    ) -> BlocksChanged:
        """Retire open blocks ``first`` … ``last`` for good (``Conflict`` BlockConflict if one
        is not open)."""
        return self._send(_core.change_blocks(_core.dataset_id(dataset), "retire", first, last))

    def list_blocks(
        self,
        dataset: str | Dataset,
        first: BlockKey | None = None,
        last: BlockKey | None = None,
        limit: int = 100,
    ) -> BlocksPage:
        """One page of the open blocks from ``first`` to ``last`` (default: all), as runs of
        blocks that share one history (``limit`` runs at most, ≤ 1000); the page's ``next``
        is the ``first`` of the next page (``None`` on the last). :meth:`iter_blocks` follows
        the pages."""
        return self._send(_core.list_blocks(_core.dataset_id(dataset), first, last, limit))

    def iter_blocks(
        self,
        dataset: str | Dataset,
        first: BlockKey | None = None,
        last: BlockKey | None = None,
        *,
        page_size: int = 100,
    ) -> Iterator[BlockRun]:
        """Every run of open blocks from ``first`` to ``last``, fetched page by page."""
        ds = _core.dataset_id(dataset)
        cursor: BlockKey | None = first
        while True:
            page = self._send(_core.list_blocks(ds, cursor, last, page_size))
            for run in page.runs:
                yield run
            if page.next is None:
                return
            cursor = page.next

    # ------------------------------------------------------------------ organisations
    def organisations(self) -> list[Organisation]:
        """The organisations the key can see: cap (ε, δ, mode), spent and remaining in the
        cap's currency, its filter's ``status`` with the certified reading, and ``usage``."""
        return self._send(_core.list_organisations())

    def create_organisation(self, name: str) -> Organisation:
        """A new organisation (admins)."""
        return self._send(_core.create_organisation(name))

    def set_organisation_cap(
        self,
        organisation_id: str,
        epsilon: Number | None = None,
        delta: Number | None = None,
        accounting: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> Organisation:
        """Set the organisation's cap (ε, δ) over all its datasets; no amounts removes it.

        ``accounting`` is the cap's mode as a dataset's, e.g. ``{"mode": "rdp"}`` (which
        accounts DP-SGD as well as everything a ``zcdp`` cap does) or ``{"mode": "rdp",
        "final_conversion_delta": "1e-7"}`` (default basic); the mode is fixed once the cap
        counted something (``Conflict`` ModeFixed), and a change never goes below what is
        counted (``Conflict`` BudgetBelowSpent). ``replace=True`` replaces a cap that has
        counted by this one, in any mode: its reading is kept as a closed statement and the
        organisation's ``statement`` is their sum (``Conflict`` ReservationsOpen while a
        reservation is open)."""
        return self._send(
            _core.set_organisation_cap(organisation_id, epsilon, delta, accounting, replace)
        )

    def organisation_cap_capacity(
        self,
        organisation_id: str,
        mechanism: MechanismLike,
        dataset_id: str | Dataset | None = None,
        conversion_delta: Number | None = None,
    ) -> CapCapacity:
        """How many more of ``mechanism`` the organisation's cap admits if nothing else runs
        (``count``, ``at_least``, ``reason`` the next one would be refused for), under the
        relation of ``dataset_id`` (default add_remove); ``Conflict`` NoCap without a cap."""
        ds = None if dataset_id is None else _core.dataset_id(dataset_id)
        return self._send(
            _core.organisation_cap_capacity(organisation_id, mechanism, ds, conversion_delta)
        )

    def organisation_report(self, organisation_id: str) -> OrganisationReport:
        """The cap replayed from every dataset's ledger: ``verified`` and ``problems``, the
        certified reading (``odometer``) and what each dataset drew (curators, auditors)."""
        return self._send(_core.organisation_report(organisation_id))

    # ------------------------------------------------------------------ principals and keys
    def whoami(self) -> Me:
        """The key's principal: ``id``, ``name``, ``role``, ``organisation`` and, for an
        analyst, ``grants`` with each quota's ``budget`` and ``summary`` (``GET /v1/me``)."""
        return self._send(_core.whoami())

    def principals(self) -> list[Principal]:
        """The principals the key can see."""
        return self._send(_core.list_principals())

    def create_principal(
        self, name: str, role: str, *, organisation_id: str | None = None
    ) -> Principal:
        """A new principal (``curator``, ``analyst``, ``auditor``; ``admin`` for admins)."""
        return self._send(_core.create_principal(name, role, organisation_id))

    def issue_key(self, principal_id: str, *, expires_at: str | None = None) -> IssuedKey:
        """A new API key for a principal: ``key`` is shown once (the server keeps a hash)."""
        return self._send(_core.issue_key(principal_id, expires_at))

    def revoke_key(self, key_id: str) -> RevokedKey:
        """Revoke an API key at once."""
        return self._send(_core.revoke_key(key_id))

    # ------------------------------------------------------------------ the witness (admin)
    def witness(self) -> WitnessState:
        """The witness of ledger heads: ``enabled``, ``location``, ``signed`` and the ``frozen``
        datasets, each with its ``reason``, ``witnessed_seq`` and ``database_seq``
        (``docs/witness.md``)."""
        return self._send(_core.witness())

    def check_witness(self) -> WitnessState:
        """Compare every dataset's ledger head with the witness now; the state after it."""
        return self._send(_core.check_witness())

    def import_ledger_tail(
        self, dataset: str | Dataset, entries: Sequence[Mapping[str, Any]]
    ) -> LedgerRecovered:
        """Bring back a dataset whose ledger is behind the witness from the lost entries of an
        export taken before: they must chain from the database's head to the witnessed one."""
        return self._send(_core.import_ledger_tail(_core.dataset_id(dataset), entries))

    def acknowledge_ledger_loss(self, dataset: str | Dataset, reason: str) -> LedgerRecovered:
        """Accept that a dataset's entries past its database head are lost: a
        ``loss_acknowledged`` ledger entry, after which the dataset serves writes again."""
        return self._send(_core.acknowledge_ledger_loss(_core.dataset_id(dataset), reason))

    # ------------------------------------------------------------------ invocations
    def register(
        self,
        dataset: str | Dataset,
        mechanism: MechanismLike,
        *,
        sub_budget: str | None = None,
        conversion_delta: Number | None = None,
        blocks: BlocksLike | None = None,
        idempotency_key: str | None = None,
        contribution: Literal["record", "person"] | None = None,
        neighbours: Literal["zero_out"] | None = None,
    ) -> Invocation:
        """Declare an invocation before it runs: ``accepted`` (charged) or ``reserved``
        (ODP). Raises ``BudgetExceeded`` (409), ``InvalidRequest`` (422), …

        On a partitioned dataset ``blocks`` names the blocks the mechanism reads (required
        there, refused elsewhere): ``{"from": KEY, "to": KEY}``, ``{"keys": [KEY, …]}``,
        ``{"ranges": [{"from": KEY, "to": KEY}, …]}`` or ``"all"`` (every open block). It is
        admitted only if every selected block admits it, and each is charged the whole cost;
        ``Invocation.blocks`` is the selection as resolved, ``BudgetExceeded.blocks`` the
        blocks that refused.

        ``contribution="person"`` asserts that the declared guarantee holds for neighbouring
        inputs that differ in any or all of one person's records in each selected block
        (bound each person's contribution, calibrate the sensitivity to it): required on a
        dataset whose partition's unit is ``person``. ``neighbours="zero_out"`` asserts
        ``tree_aggregation``'s zero-out neighbours (each record keeps its leaf when another is
        added or removed): required for a tree aggregation on an ``add_remove`` dataset. Both
        are recorded in the ledger entry."""
        return self._send(
            _core.register(
                _core.dataset_id(dataset),
                mechanism,
                sub_budget,
                conversion_delta,
                idempotency_key,
                blocks,
                contribution,
                neighbours,
            )
        )

    def preview(
        self,
        dataset: str | Dataset,
        mechanism: MechanismLike,
        *,
        sub_budget: str | None = None,
        conversion_delta: Number | None = None,
        blocks: BlocksLike | None = None,
        contribution: Literal["record", "person"] | None = None,
        neighbours: Literal["zero_out"] | None = None,
    ) -> PreviewResult:
        """The decision a registration would get now; nothing is written. With ``blocks`` (a
        partitioned dataset) ``PreviewResult.blocks`` says which selected blocks can afford it
        and how many more of it fit; ``contribution`` and ``neighbours`` as in
        :meth:`register`."""
        return self._send(
            _core.preview(
                _core.dataset_id(dataset),
                mechanism,
                sub_budget,
                conversion_delta,
                blocks,
                contribution,
                neighbours,
            )
        )

    def settle(
        self,
        dataset: str | Dataset,
        invocation: str | Invocation,
        cell: str | None = None,
        *,
        output: Any = _core.NO_OUTPUT,
        idempotency_key: str | None = None,
    ) -> Settlement:
        """Settle at the cell the released output fell in; the rest of the reserved ε is
        refunded.

        Name the ``cell``, or give the released ``output`` (or the part of it that decides
        the cell) and the server derives the cell: ``svt`` the answers in order (``True`` =
        ⊤), ``ptr`` ``None`` (⊥) or the released value, ``iterative`` the number of
        iterations run, ``tested_release`` the test's verdict (``True`` = passed). Both may
        be given; they must agree. Numbers in an output as ``int``, ``Decimal`` or decimal
        text: the server records the SHA-256 of its canonical JSON
        (``Settlement.output_digest``), which has no binary floats.
        """
        return self._send(
            _core.settle(
                _core.dataset_id(dataset),
                _core.invocation_id(invocation),
                cell,
                output,
                idempotency_key,
            )
        )

    def cancel(
        self,
        dataset: str | Dataset,
        invocation: str | Invocation,
        *,
        idempotency_key: str | None = None,
    ) -> Settlement:
        """Release a reservation whose mechanism never ran (full refund)."""
        return self._send(
            _core.cancel(
                _core.dataset_id(dataset), _core.invocation_id(invocation), idempotency_key
            )
        )

    def get_invocation(self, dataset: str | Dataset, invocation: str | Invocation) -> Invocation:
        return self._send(
            _core.get_invocation(_core.dataset_id(dataset), _core.invocation_id(invocation))
        )

    @contextmanager
    def reserve(
        self,
        dataset: str | Dataset,
        mechanism: MechanismLike,
        *,
        sub_budget: str | None = None,
        conversion_delta: Number | None = None,
        blocks: BlocksLike | None = None,
        idempotency_key: str | None = None,
        contribution: Literal["record", "person"] | None = None,
        neighbours: Literal["zero_out"] | None = None,
    ) -> Iterator[Reservation]:
        """Register, yield a reservation handle, and make sure it ends settled or cancelled.

        - the block raises before ``r.settle()`` (and before ``r.mark_ran()``): the
          reservation is cancelled (full refund) and the exception re-raised;
        - the block raises after ``r.mark_ran()``: nothing is refunded (the mechanism ran);
        - the block ends normally without settling: :class:`ReservationNotSettled` is raised
          and the reservation stays charged at its worst cell (safe); never a silent refund.

        Non-ODP mechanisms are ``accepted`` (charged in full) at once: nothing to settle.
        ``blocks``, ``contribution`` and ``neighbours`` as in :meth:`register` (the server
        remembers the reservation's blocks).
        """
        inv = self.register(
            dataset,
            mechanism,
            sub_budget=sub_budget,
            conversion_delta=conversion_delta,
            blocks=blocks,
            idempotency_key=idempotency_key,
            contribution=contribution,
            neighbours=neighbours,
        )
        r = Reservation(self, inv)
        try:
            yield r
        except BaseException as exc:
            if r.open and not r.ran:
                try:
                    r.cancel()
                except Exception as cancel_exc:  # keep the user's exception primary
                    exc.add_note(f"odometer: cancelling {inv.id} failed: {cancel_exc!r}")
            raise
        if r.open:
            raise ReservationNotSettled(inv.dataset_id, inv.id)

    # ------------------------------------------------------------------ ledger
    def ledger(
        self,
        dataset: str | Dataset,
        *,
        after_seq: int = 0,
        page_size: int = 1000,
        since: str | None = None,
        until: str | None = None,
        actor: str | None = None,
        kinds: tuple[str, ...] = (),
    ) -> Iterator[LedgerEntry]:
        """Ledger entries in ``seq`` order, fetched page by page (each one's ``raw`` exactly as
        hashed)."""
        ds = _core.dataset_id(dataset)
        q = LedgerQuery(after_seq, page_size, since, until, actor, kinds)
        cursor: int | None = after_seq
        while cursor is not None:
            entries, cursor = self._send(_core.ledger_page(ds, q, cursor))
            for entry in entries:
                yield entry

    def export(
        self,
        dataset: str | Dataset,
        path: str | Path,
        format: ExportFormat | None = None,
        *,
        page_size: int = 10_000,
    ) -> int:
        """Write the whole ledger to ``path`` (``json``: ``{"dataset_id", "entries"}``,
        ``jsonl``: one entry per line, ``csv``: the server's columns); returns the count.
        Without ``format``, the one ``path``'s name asks for (``.json``, ``.csv``, ``.jsonl``;
        any other name: JSON lines), as ``odometer export`` chooses. Every format is accepted
        by ``odometer verify``.

        The server writes the file (``GET …/ledger?export=true``, up to the head at the time of
        the request) and the client saves the bytes as they arrive: memory for one chunk.
        ``page_size`` is accepted for compatibility and no longer used (the export is one
        streamed response, batched by the server). A failed attempt is retried from the start.
        """
        del page_size
        call = _core.export_ledger(_core.dataset_id(dataset), format or format_of(path))
        attempt = 0
        with Path(path).open("wb") as out:
            while True:
                out.seek(0)
                out.truncate()
                try:
                    with self._http.stream(
                        call.method,
                        call.path,
                        params=tuple(call.params),
                        headers=self.seen.headers(call),
                    ) as response:
                        if response.status_code < 400:
                            count = _core.exported_count(response)
                            self.seen.note(response, None)
                            for chunk in response.iter_bytes():
                                out.write(chunk)
                            return count
                        response.read()
                        if attempt >= self.retry.retries or not _core.retryable_response(
                            response, call
                        ):
                            raise _core.to_error(response)
                except httpx.TransportError as exc:
                    if attempt >= self.retry.retries or not _core.retryable_exception(exc, call):
                        raise TransportError(f"{call.method} {call.path}: {exc!r}") from exc
                _core.sleep(self.retry.delay(attempt))
                attempt += 1

    def report(self, dataset: str | Dataset) -> Report | None:
        """``GET …/report`` if the server has it, else ``None`` (see ``odometer_client.ledger``)."""
        try:
            return self._send(_core.get_report(_core.dataset_id(dataset)))
        except NotFound as exc:
            if exc.detail == "Not Found":  # the framework's 404: no such route on this server
                return None
            raise


class Reservation:
    """A handle on a registered invocation inside ``client.reserve(...)``."""

    def __init__(self, client: OdometerClient, invocation: Invocation) -> None:
        self._client = client
        self.invocation = invocation
        self.result: Settlement | None = None
        self.ran = False

    @property
    def id(self) -> str:
        return self.invocation.id

    @property
    def status(self) -> str:
        return self.result.status if self.result else self.invocation.status

    @property
    def cells(self) -> dict[str, Decimal]:
        """The reserved cells and their ε (``Decimal``)."""
        return self.invocation.cells

    @property
    def open(self) -> bool:
        """Still reserved (neither settled nor cancelled, and not a plain acceptance)."""
        return self.result is None and self.invocation.status == "reserved"

    def mark_ran(self) -> None:
        """Record that the mechanism ran: an exception from now on no longer cancels."""
        self.ran = True

    def settle(
        self,
        cell: str | None = None,
        *,
        output: Any = _core.NO_OUTPUT,
        idempotency_key: str | None = None,
    ) -> Settlement:
        """Settle at ``cell``, or at the cell of the released ``output`` (see the client's
        ``settle``)."""
        self.ran = True
        self.result = self._client.settle(
            self.invocation.dataset_id,
            self.invocation.id,
            cell,
            output=output,
            idempotency_key=idempotency_key,
        )
        return self.result

    def cancel(self, *, idempotency_key: str | None = None) -> Settlement:
        self.result = self._client.cancel(
            self.invocation.dataset_id, self.invocation.id, idempotency_key=idempotency_key
        )
        return self.result


__all__ = ["OdometerClient", "Reservation"]
