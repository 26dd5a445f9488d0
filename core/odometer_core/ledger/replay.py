"""Replay a ledger through the accounting core and check it end to end.

:func:`replay` takes the entries of one dataset in ``seq`` order (as exported: every payload
field plus ``hash``), checks the hash chain (:mod:`odometer_core.ledger.chain`) and re-runs every
entry:

- ``dataset_created``  → ``config_from_json`` + ``initial_state``
- ``budget_changed``   → ``change_budget`` with the stored arguments
- ``invocation_accepted|reserved|rejected`` → ``admit`` with the stored declaration and extras
- ``invocation_settled`` → ``settle`` with the reservation opened earlier and the stored cell
  (and the released output's digest, when recorded, checked for its form)
- ``invocation_cancelled`` → ``cancel`` of that reservation
- ``grant_changed`` → an analyst's quota filter starts (``initial_state``) or ends
- ``loss_acknowledged`` → nothing moves (the state is the one before it): an operator
  acknowledged that the entries after the previous one were lost (:func:`_loss`; the fork it
  makes explicit: :mod:`odometer_core.ledger.cosign`)

Quota levels are replayed per analyst as well: every entry's ``quota`` part is recomputed
with the quota filter opened by the latest ``grant_changed`` for that analyst. A quota is named
by its grant, the ``seq`` of that ``grant_changed`` entry (an entry's ``quota.grant``, when
recorded, must name it), and a reservation belongs to the quota that reserved it: from
accounting 1.4.0 on, its settle or cancel finishes it at that quota while its grant is in
force, and records the share as ``dropped`` once the grant is revoked or replaced; a settle that
refunds a quota which did not reserve, or that drops the share of a quota still in force, is a
mismatch (:func:`odometer_core.accounting.levels.quota_holds`; earlier entries replay as they
were written: at the analyst's quota in force, when they have a quota part). A rejection by
an upper level (organisation or quota) must leave the dataset state unchanged and charge
nothing here. The organisation level spans datasets, so one dataset's ledger cannot replay it;
its charges are recorded (``org``) and their sum over the organisation's datasets is the
organisation's counted state.

After each step the recomputed state (``state_to_json``) must equal the stored ``state``
exactly (a ``zcdp`` / ``gdp`` / ``rdp`` first admission is decided with the ladder shape the
entry records where the mode's rule could have chosen it with its floats off by
:data:`~odometer_core.accounting.modes.first_ladder.FLOAT_TOLERANCE`:
:func:`~odometer_core.accounting.modes.first_ladder.chosen`,
:func:`~odometer_core.accounting.modes.rdp_choice.chosen`), and the recomputed outcome,
charge, refund, reservation and configuration must equal what was recorded. No database
access: the offline verifier uses this module as is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from odometer_core.accounting import (
    ACCOUNTING_VERSION,
    AccountingConfig,
    Decision,
    Declaration,
    FilterState,
    Reservation,
    admit,
    cancel,
    change_budget,
    config_from_json,
    config_to_json,
    initial_state,
    legacy,
    parse_declaration,
    settle,
    state_to_json,
    status,
)
from odometer_core.accounting.amounts import amount_json
from odometer_core.accounting.blocks import (
    Blocks,
    Range,
    change_blocks,
    decide_selection,
    finish_reservation,
    retire,
    summarise,
)
from odometer_core.accounting.json_types import OdometerReading, StateJSON
from odometer_core.accounting.levels import DROPPED, quota_holds
from odometer_core.accounting.modes import first_ladder
from odometer_core.ledger.blocks import (
    BLOCKS,
    HIGHEST,
    BlockHistory,
    Partitioned,
    fresh_blocks,
    raised,
    ranges_from_json,
    ranges_json,
    shown_reading,
    touched_digest,
)
from odometer_core.ledger.chain import GENESIS_HASH, ChainProblem, ChainWalker
from odometer_core.ledger.entry import EntryKind
from odometer_core.ledger.float_noise import admit_as_recorded

#: The form of a settle entry's ``output_digest``, the SHA-256 of the released output
#: (:func:`~odometer_core.ledger.chain.output_digest`; the ledger keeps no more of the output).
_HEX_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


#: An analyst's quota as replayed: its filter and the grant that opened it (the ``seq`` of its
#: ``grant_changed`` entry).
Quota = tuple[AccountingConfig, FilterState, int]


@dataclass(frozen=True, slots=True)
class ReplayVerdict:
    """The result of a replay: ``ok`` iff no problem was found."""

    ok: bool
    entries: int
    head_hash: str
    state: StateJSON | None
    problems: list[str] = field(default_factory=list)
    #: the certified reading of the replayed configuration and state, as the service's
    #: ``status.odometer`` shows it (``None`` for a ledger without a dataset)
    odometer: OdometerReading | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "head_hash": self.head_hash,
            "state": self.state,
            "odometer": self.odometer,
            "problems": self.problems,
        }


class _Mismatch(Exception):
    pass


def _expect(what: str, recomputed: object, stored: object) -> None:
    if recomputed != stored:
        raise _Mismatch(f"{what}: recomputed {recomputed!r}, stored {stored!r}")


class _Declarations:
    """``parse_declaration`` memoised by the text (``repr``) of the stored declaration.

    A long ledger repeats a handful of declarations (the same mechanism run again and again),
    and parsing one (validation, Decimal parsing) cost as much as admitting it. Declarations
    are immutable, so one parsed object serves every entry with the same text. Only
    declarations whose ``to_json()`` equals the stored object are kept, so a hit also means
    the round-trip check passed. The key is ``repr`` of the stored dict (C speed; equal
    ``repr`` of JSON values means equal values, and ``"1"``, ``1``, ``1.0`` and ``True`` all
    differ). Bounded: the table is emptied when it reaches ``limit``.
    """

    __slots__ = ("_known", "limit")

    def __init__(self, limit: int = 4096) -> None:
        self._known: dict[str, Declaration] = {}
        self.limit = limit

    def parse(self, stored: Any) -> Declaration:
        """The declaration of ``stored``; :class:`_Mismatch` if it does not round-trip."""
        key = repr(stored) if type(stored) is dict else None
        if key is not None:
            known = self._known.get(key)
            if known is not None:
                return known
        declaration = parse_declaration(stored)
        _expect("declaration", declaration.to_json(), stored)
        if key is not None:
            if len(self._known) >= self.limit:
                self._known.clear()
            self._known[key] = declaration
        return declaration


def replay(entries: Iterable[Mapping[str, Any]]) -> ReplayVerdict:
    """Verify the chain and recompute every state; stops re-running at the first mismatch
    (later states would differ anyway) but keeps checking the chain. ``entries`` is consumed
    once, as it streams (see :class:`Replayer`)."""
    replayer = Replayer()
    for entry in entries:
        replayer.feed(entry)
    return replayer.verdict()


class Replayer:
    """:func:`replay` one entry at a time: memory stays bounded by the open reservations and
    quotas, not by the length of the ledger. :meth:`snapshot` copies the position reached, so
    a verification can resume from there (e.g. re-checking a ledger changed after some entry).

    ``check_chain=False`` re-runs the entries only: ``odometer verify`` walks the hash chain in
    a second process and adds its problems with :meth:`add_chain_problems`. ``strict_json``
    is passed to the :class:`ChainWalker` (entries parsed by ``loads_strict``).
    """

    def __init__(self, *, check_chain: bool = True, strict_json: bool = False) -> None:
        self.chain = ChainWalker(strict_json=strict_json)
        self.check_chain = check_chain
        self.declarations = _Declarations()
        self.chain_problems: list[str] = []
        self.replay_problems: list[str] = []
        self.config: AccountingConfig | None = None
        self.state: FilterState | BlockHistory | None = None
        self.reservations: dict[str, Reservation] = {}
        #: a partitioned dataset's open reservations: invocation id → the blocks it reserved on
        self.selections: dict[str, tuple[Range, ...]] = {}
        self.quotas: dict[str, Quota] = {}
        #: open reservations held at a quota: invocation id → (analyst, grant that reserved)
        self.quota_holds: dict[str, tuple[str, int]] = {}
        self.entries = 0
        self.head_hash = GENESIS_HASH
        self.stopped = False

    def feed(self, entry: Mapping[str, Any]) -> None:
        """Check the next entry's chain link and, until the first mismatch, re-run it."""
        if self.check_chain:
            self.add_chain_problems(self.chain.check(entry))
        self.entries += 1
        position = self.entries
        self.head_hash = str(entry.get("hash"))
        if self.stopped:
            return
        try:
            entry = _current(entry)
            # a ladder shape chosen within float noise (zcdp, gdp, rdp): as recorded
            with first_ladder.recorded(entry):
                self._step(entry, position)
        except _Mismatch as exc:
            self.replay_problems.append(f"entry {position} ({entry.get('kind')}): {exc}")
            self.stopped = True
        except Exception as exc:  # a corrupted entry must give a verdict, not a crash
            self.replay_problems.append(
                f"entry {position} ({entry.get('kind')}): cannot replay: {exc!r}"
            )
            self.stopped = True

    def _step(self, entry: Mapping[str, Any], position: int) -> None:
        if isinstance(self.state, BlockHistory):
            assert self.config is not None
            self.config, self.state = _block_step(
                entry,
                self.config,
                self.state,
                self.reservations,
                self.selections,
                self.declarations,
            )
        else:
            self.config, self.state = _step(
                entry,
                position,
                self.config,
                self.state,
                self.reservations,
                self.declarations,
            )
        _quota_step(entry, self.quotas, self.quota_holds, self.declarations)

    def add_chain_problems(self, problems: Iterable[ChainProblem]) -> None:
        """Record hash-chain defects (from :attr:`chain` or a walker run elsewhere)."""
        self.chain_problems.extend(
            f"entry {p.position} (seq {p.seq!r}): {p.problem}" for p in problems
        )

    def snapshot(self) -> Replayer:
        """An independent copy of this replayer at the current position."""
        twin = Replayer(check_chain=self.check_chain)
        twin.chain = ChainWalker(
            self.chain.prev_hash,
            self.chain.position,
            self.chain.dataset,
            strict_json=self.chain.strict_json,
        )
        twin.declarations = self.declarations  # immutable values: sharing is safe
        twin.chain_problems = list(self.chain_problems)
        twin.replay_problems = list(self.replay_problems)
        twin.config, twin.state = self.config, self.state
        twin.reservations = dict(self.reservations)
        twin.selections = dict(self.selections)
        twin.quotas = dict(self.quotas)
        twin.quota_holds = dict(self.quota_holds)
        twin.entries, twin.head_hash, twin.stopped = self.entries, self.head_hash, self.stopped
        return twin

    def _odometer(self) -> OdometerReading | None:
        """The certified reading of the replayed dataset, as its status shows it: a
        partitioned dataset's is the maintained reading, the highest over every block ever
        opened, retired ones included (recomputed, whether or not its entries carry it)."""
        if self.config is None or self.state is None:
            return None
        if isinstance(self.state, BlockHistory):
            return shown_reading(self.config, self.state.aggregate.highest)
        reading: OdometerReading = status(self.config, self.state)["odometer"]
        return reading

    def verdict(self) -> ReplayVerdict:
        problems = [*self.chain_problems, *self.replay_problems]
        return ReplayVerdict(
            ok=not problems,
            entries=self.entries,
            head_hash=self.head_hash,
            state=None if self.state is None else _state_json(self.state),
            problems=problems,
            odometer=self._odometer(),
        )


def _current(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """The entry in today's field names: as written, or upgraded from an earlier accounting
    version this verifier still reads (:mod:`odometer_core.accounting.legacy`)."""
    version = entry.get("accounting_version")
    if version in (ACCOUNTING_VERSION, *_READ_AS_WRITTEN):
        return entry
    if version == legacy.VERSION_1_0:
        return legacy.upgrade_entry(entry)
    earlier = ", ".join(repr(v) for v in _READ_AS_WRITTEN)
    raise _Mismatch(
        f"recorded with accounting version {version!r}; this verifier implements "
        f"{ACCOUNTING_VERSION!r} (and reads {earlier} and {legacy.VERSION_1_0!r})"
    )


#: Earlier accounting versions whose entries replay as written (their rules are recorded in
#: the configurations: :mod:`odometer_core.accounting.legacy`).
_READ_AS_WRITTEN = (
    legacy.VERSION_1_9,
    legacy.VERSION_1_8,
    legacy.VERSION_1_7,
    legacy.VERSION_1_6,
    legacy.VERSION_1_5,
    legacy.VERSION_1_4,
    legacy.VERSION_1_3,
    legacy.VERSION_1_2,
    legacy.VERSION_1_1,
)


def _state_json(state: FilterState | BlockHistory) -> StateJSON:
    if isinstance(state, BlockHistory):
        return state.to_json()
    return state_to_json(state)


def _step(
    entry: Mapping[str, Any],
    position: int,
    config: AccountingConfig | None,
    state: FilterState | BlockHistory | None,
    reservations: dict[str, Reservation],
    declarations: _Declarations,
) -> tuple[AccountingConfig, FilterState | BlockHistory]:
    kind = entry.get("kind")
    request: Mapping[str, Any] = entry.get("request") or {}
    if kind == EntryKind.DATASET_CREATED:
        if position != 1:
            raise _Mismatch("dataset_created after the first entry")
        config = config_from_json(entry["config"])
        _expect("config", config_to_json(config), entry["config"])
        if request.get("partition") is not None:
            stored = (entry.get("state") or {}).get(BLOCKS) or {}
            earlier = HIGHEST not in stored  # created before the maintained reading existed
            history = BlockHistory(Partitioned(0, 0, (), None, None, earlier), Blocks())
            _expect("state", history.to_json(), entry["state"])
            return config, history
        state = initial_state(config)
    elif config is None or state is None:
        raise _Mismatch("the ledger does not start with dataset_created")
    elif isinstance(state, BlockHistory):  # pragma: no cover - the replayer routes these
        raise _Mismatch("a partitioned dataset's entry replayed as a whole dataset's")
    elif kind == EntryKind.BUDGET_CHANGED:
        config, state = change_budget(
            config,
            state,
            request["epsilon"],
            request["delta"],
            sub_budget=request.get("sub_budget"),
            final_conversion_delta=request.get("final_conversion_delta"),
            workload=request.get("workload"),
            anchored=entry.get("accounting_version") not in legacy.BEFORE_1_4,
            recorded=True,
        )
        _expect("config", config_to_json(config), entry["config"])
    elif kind == EntryKind.GRANT_CHANGED:
        pass
    elif kind == EntryKind.LOSS_ACKNOWLEDGED:
        _loss(entry)
    elif kind in (
        EntryKind.INVOCATION_ACCEPTED,
        EntryKind.INVOCATION_RESERVED,
        EntryKind.INVOCATION_REJECTED,
    ):
        declaration = declarations.parse(entry["declaration"])
        conversion = request.get("conversion_delta")
        decision = admit_as_recorded(  # a PLD charge within float noise: as recorded
            config,
            state,
            declaration,
            sub_budget=request.get("sub_budget"),
            conversion_delta=None if conversion is None else Decimal(conversion),
            recorded=entry.get("requested"),
        )
        if kind == EntryKind.INVOCATION_REJECTED and decision.admitted:
            _refused_above(entry, "the dataset")  # and nothing moves here
            _expect("requested", amount_json(decision.requested), entry["requested"])
            _expect("state", state_to_json(state), entry["state"])
            return config, state
        _expect("outcome", f"invocation_{decision.outcome}", kind)
        _expect("charge", amount_json(decision.charge), entry["charge"])
        _expect("requested", amount_json(decision.requested), entry["requested"])
        reservation = decision.reservation.to_json() if decision.reservation else None
        _expect("reservation", reservation, entry["reservation"])
        if decision.reservation is not None:
            reservations[str(entry["invocation_id"])] = decision.reservation
        state = decision.state
    elif kind in (EntryKind.INVOCATION_SETTLED, EntryKind.INVOCATION_CANCELLED):
        open_reservation = reservations.pop(str(entry["invocation_id"]), None)
        if open_reservation is None:
            raise _Mismatch("no open reservation for this invocation")
        _expect("reservation", open_reservation.to_json(), entry["reservation"])
        if kind == EntryKind.INVOCATION_SETTLED:
            _check_output_digest(request)
            decision = settle(config, state, open_reservation, request["cell"])
        else:
            decision = cancel(config, state, open_reservation)
        _expect("charge", amount_json(decision.charge), entry["charge"])
        _expect("refund", amount_json(decision.refund), entry["refund"])
        state = decision.state
    else:
        raise _Mismatch(f"unknown entry kind {kind!r}")
    _expect("state", _state_json(state), entry["state"])
    return config, state


def _block_step(
    entry: Mapping[str, Any],
    config: AccountingConfig,
    history: BlockHistory,
    reservations: dict[str, Reservation],
    selections: dict[str, tuple[Range, ...]],
    declarations: _Declarations,
) -> tuple[AccountingConfig, BlockHistory]:
    """One entry of a partitioned dataset's ledger, re-run on every open block
    (:mod:`odometer_core.ledger.blocks`): the selection's decision, the blocks opened, retired
    or changed, and the aggregate state with the touched blocks' digest and the maintained
    reading (``highest``) checked."""
    kind = entry.get("kind")
    request: Mapping[str, Any] = entry.get("request") or {}
    aggregate, blocks = history.aggregate, history.blocks
    digest, highest = aggregate.digest, aggregate.highest
    # Written since the maintained reading exists: the entry carries it, and its budget
    # change was checked against it (earlier entries replay by the rules they were written by).
    current = HIGHEST in ((entry.get("state") or {}).get(BLOCKS) or {})
    touched: tuple[Range, ...] = ()
    if kind == EntryKind.BUDGET_CHANGED:
        config, blocks = change_blocks(
            config,
            blocks,
            request["epsilon"],
            request["delta"],
            final_conversion_delta=request.get("final_conversion_delta"),
            workload=request.get("workload"),
            highest=highest if current else None,
        )
        _expect("config", config_to_json(config), entry["config"])
        touched = tuple((r.lo, r.hi) for r in blocks.runs)
        digest = touched_digest(blocks, touched)
    elif kind == EntryKind.GRANT_CHANGED:
        pass
    elif kind == EntryKind.LOSS_ACKNOWLEDGED:
        _loss(entry)
    elif kind in (EntryKind.BLOCKS_OPENED, EntryKind.BLOCKS_RETIRED):
        lo, hi = int(request["from"]), int(request["to"])
        if kind == EntryKind.BLOCKS_OPENED:
            if blocks.ever_opened(lo, hi):
                raise _Mismatch(f"blocks of [{lo}, {hi}) were opened before")
            blocks = fresh_blocks(config, lo, hi, blocks)
            touched = ((lo, hi),)
        else:
            # the retired blocks' readings are taken before their runs are dropped
            highest = raised(highest, config, blocks, [(lo, hi)])
            blocks = retire(blocks, lo, hi)
        digest = touched_digest(blocks, [(lo, hi)])
    elif kind in (
        EntryKind.INVOCATION_ACCEPTED,
        EntryKind.INVOCATION_RESERVED,
        EntryKind.INVOCATION_REJECTED,
    ):
        ranges = ranges_from_json(request["blocks"])
        conversion = request.get("conversion_delta")
        selection = decide_selection(
            config,
            blocks,
            ranges,
            declarations.parse(entry["declaration"]),
            conversion_delta=None if conversion is None else Decimal(conversion),
        )
        decision = summarise(selection)
        if kind == EntryKind.INVOCATION_REJECTED and decision.admitted:
            _refused_above(entry, "the blocks")  # and nothing moves here
        else:
            _expect("outcome", f"invocation_{decision.outcome}", kind)
            _expect("charge", amount_json(decision.charge), entry["charge"])
            reservation = decision.reservation.to_json() if decision.reservation else None
            _expect("reservation", reservation, entry["reservation"])
            if decision.admitted:
                blocks = selection.blocks
                touched = ranges
            if decision.reservation is not None:
                reservations[str(entry["invocation_id"])] = decision.reservation
                selections[str(entry["invocation_id"])] = ranges
        _expect("requested", amount_json(decision.requested), entry["requested"])
        digest = touched_digest(blocks, ranges)
    elif kind in (EntryKind.INVOCATION_SETTLED, EntryKind.INVOCATION_CANCELLED):
        invocation = str(entry["invocation_id"])
        open_reservation = reservations.pop(invocation, None)
        ranges = selections.pop(invocation, ())
        if open_reservation is None:
            raise _Mismatch("no open reservation for this invocation")
        _expect("reservation", open_reservation.to_json(), entry["reservation"])
        _expect("blocks", ranges_json(ranges), request.get("blocks"))
        cell = None
        if kind == EntryKind.INVOCATION_SETTLED:
            _check_output_digest(request)
            cell = request["cell"]
        finished = finish_reservation(config, blocks, ranges, open_reservation, cell)
        # the reservation's blocks retired since it was made, named by the entry
        _expect("retired", ranges_json(finished.retired) or None, request.get("retired"))
        decision = finished.decision
        _expect("charge", amount_json(decision.charge), entry["charge"])
        _expect("refund", amount_json(decision.refund), entry["refund"])
        blocks = finished.blocks
        touched = ranges
        digest = touched_digest(blocks, ranges)
    else:
        raise _Mismatch(f"unknown entry kind {kind!r}")
    highest = raised(highest, config, blocks, touched)
    if not current and not aggregate.legacy:
        raise _Mismatch(
            "the state has no maintained reading ('highest'), which the entries before it carry"
        )
    open_blocks = blocks.count  # kept by the operations, not counted again per entry
    after = Partitioned(
        open_blocks, len(blocks.runs), blocks.opened, digest, highest, legacy=not current
    )
    _expect("state", after.to_json(), entry["state"])
    return config, BlockHistory(after, blocks)


def _loss(entry: Mapping[str, Any]) -> None:
    """An acknowledged loss: it names the witnessed head that was lost and the database's head
    it follows (its predecessor), charges nothing, and touches no level (the caller checks
    that the state did not move)."""
    request: Mapping[str, Any] = entry.get("request") or {}
    lost, held = request.get("witnessed_seq"), request.get("database_seq")
    if type(lost) is not int or type(held) is not int:
        raise _Mismatch("a loss_acknowledged entry names the witnessed and the database seq")
    _expect("database_seq", int(entry["seq"]) - 1, held)
    signed = request.get("signed_head")  # the last cosigned head before the loss, if named
    if signed is not None and not (
        isinstance(signed, Mapping)
        and set(signed) == {"size", "root"}
        and type(signed["size"]) is int
        and signed["size"] >= 0
        and isinstance(signed["root"], str)
        and _HEX_DIGEST.fullmatch(signed["root"])
    ):
        raise _Mismatch("a loss_acknowledged entry's signed_head is {size, root: 64 hex digits}")
    for name in ("charge", "refund", "reservation", "org", "quota", "config"):
        _expect(name, None, entry.get(name))


def _refused_above(entry: Mapping[str, Any], level: str) -> None:
    """A rejection ``level`` admitted: an upper level (organisation, quota) must have refused,
    and nothing was charged at ``level``."""
    upper = [entry.get("org"), entry.get("quota")]
    if not any(p and p.get("outcome") == "rejected" for p in upper):
        raise _Mismatch(f"rejected, but neither {level} nor an upper level refused")
    _expect("charge", None, entry["charge"])


def _check_output_digest(request: Mapping[str, Any]) -> None:
    """A settle from the released output records the output's SHA-256 (``output_digest``, 64
    lowercase hex digits); settles that named their cell, and every entry written before
    outputs were accepted, have none and replay unchanged."""
    digest = request.get("output_digest")
    if digest is not None and not (isinstance(digest, str) and _HEX_DIGEST.fullmatch(digest)):
        raise _Mismatch("output_digest is not a SHA-256 hex digest")


def _quota_step(
    entry: Mapping[str, Any],
    quotas: dict[str, Quota],
    holds: dict[str, tuple[str, int]],
    declarations: _Declarations,
) -> None:
    """Replay the analyst-quota part of one entry (see the module docstring)."""
    part: Mapping[str, Any] | None = entry.get("quota")
    kind = entry.get("kind")
    finishing = kind in (EntryKind.INVOCATION_SETTLED, EntryKind.INVOCATION_CANCELLED)
    held = holds.pop(str(entry.get("invocation_id")), None) if finishing else None
    if finishing and entry.get("accounting_version") not in legacy.BEFORE_1_4:
        _finish_quota(entry, part, held, quotas)
        return
    if part is None:
        return
    owner = str(part["id"])
    if kind == EntryKind.GRANT_CHANGED:
        if part.get("config") is None:
            quotas.pop(owner, None)
            return
        config = config_from_json(part["config"])
        _expect("quota config", config_to_json(config), part["config"])
        state = initial_state(config)
        _expect("quota state", state_to_json(state), part["state"])
        quotas[owner] = (config, state, int(entry["seq"]))
        return
    if owner not in quotas:
        raise _Mismatch(f"quota of '{owner}' charged without a grant")
    config, state, grant = quotas[owner]
    if "grant" in part:
        _expect("quota grant", grant, part["grant"])
    if kind in (
        EntryKind.INVOCATION_ACCEPTED,
        EntryKind.INVOCATION_RESERVED,
        EntryKind.INVOCATION_REJECTED,
    ):
        request: Mapping[str, Any] = entry.get("request") or {}
        conversion = request.get("conversion_delta")
        decision = admit(
            config,
            state,
            declarations.parse(entry["declaration"]),
            conversion_delta=None if conversion is None else Decimal(conversion),
        )
        _expect("quota outcome", decision.outcome, part["outcome"])
        _expect("quota requested", amount_json(decision.requested), part["requested"])
        if part["applied"] and decision.reservation is not None:
            holds[str(entry["invocation_id"])] = (owner, grant)
    elif finishing:
        decision = _finish(config, state, entry)
    else:
        raise _Mismatch(f"a quota part on a {kind!r} entry")
    if part["applied"]:
        _expect("quota charge", amount_json(decision.charge), part["charge"])
        state = decision.state
    _expect("quota state", state_to_json(state), part["state"])
    quotas[owner] = (config, state, grant)


def _finish(config: AccountingConfig, state: FilterState, entry: Mapping[str, Any]) -> Decision:
    """A quota's settle or cancel of the entry's reservation (a leaf: no sub-budget)."""
    reservation = Reservation.from_json(entry["reservation"])
    reservation = Reservation(reservation.partition, None)
    if entry.get("kind") == EntryKind.INVOCATION_SETTLED:
        request: Mapping[str, Any] = entry.get("request") or {}
        return settle(config, state, reservation, request["cell"])
    return cancel(config, state, reservation)


def _finish_quota(
    entry: Mapping[str, Any],
    part: Mapping[str, Any] | None,
    held: tuple[str, int] | None,
    quotas: dict[str, Quota],
) -> None:
    """A settle or cancel (accounting 1.4.0 on): the quota that reserved (``held``) finishes
    its share while its grant is in force; once the grant is gone the entry records the share
    as dropped, and no quota moves. A quota that did not reserve is never touched."""
    if held is None:
        if part is not None:
            raise _Mismatch(
                f"the quota of '{part.get('id')}' did not reserve this invocation (no quota "
                "did), yet the entry finishes it there"
            )
        return
    owner, reserved_under = held
    if part is None:
        raise _Mismatch(
            f"the quota of '{owner}' (grant {reserved_under}) reserved this invocation; the "
            "entry does not say how its share ended"
        )
    _expect("quota id", owner, part["id"])
    if "grant" in part:
        _expect("quota grant", reserved_under, part["grant"])
    live = quotas.get(owner)
    in_force = None if live is None else live[2]
    dropped = part.get("outcome") == DROPPED
    if not quota_holds(reserved_under, in_force):
        if not dropped or part.get("applied"):
            now = "no grant is" if in_force is None else f"grant {in_force} is"
            raise _Mismatch(
                f"the entry finishes the share at the quota of '{owner}', which did not reserve "
                f"this invocation (grant {reserved_under} did, and {now} in force now)"
            )
        return
    assert live is not None
    if dropped:
        raise _Mismatch(
            f"the quota share is dropped, but grant {reserved_under} of '{owner}', which "
            "reserved, is still in force"
        )
    config, state, grant = live
    decision = _finish(config, state, entry)
    _expect("quota applied", True, part["applied"])
    _expect("quota charge", amount_json(decision.charge), part["charge"])
    _expect("quota refund", amount_json(decision.refund), part["refund"])
    _expect("quota state", state_to_json(decision.state), part["state"])
    quotas[owner] = (config, decision.state, grant)
