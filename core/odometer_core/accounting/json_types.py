"""The shapes of the JSON the core writes and the app stores, answers and reads back.

Each :class:`~typing.TypedDict` here is the return type of the function that builds it (named
in its docstring), written from that builder; a key that is sometimes absent is
``NotRequired`` (absent, not null), a key that may be null says ``| None``. They cost nothing
at run time: a TypedDict is a plain ``dict``.

Four shapes vary by mode or by kind and are named, not spelled out, because their keys are
another module's to say: :data:`DeclarationJSON` (a declaration's ``to_json``, by kind:
:func:`~odometer_core.accounting.declarations.parse_declaration` reads it),
:data:`ConfigJSON` and :data:`StateJSON` (a filter's configuration and state, by mode:
:func:`~odometer_core.accounting.filters.config_from_json` and ``state_from_json`` read them)
and :data:`AmountJSON` (a charge or a refund in the mode's units:
:func:`~odometer_core.accounting.amounts.amount_json`). A status view
(:class:`StatusView`) spells out what every mode's has and leaves the mode's own figures to
its mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "AmountJSON",
    "Attribution",
    "BlockSpan",
    "CapOrder",
    "CapacityJSON",
    "CheckpointAuditSummary",
    "CheckpointRecord",
    "ClosedPhaseJSON",
    "ConfigJSON",
    "CosignedJSON",
    "CurveJSON",
    "DeclarationJSON",
    "DrawnJSON",
    "EndPinJSON",
    "EntryPayload",
    "EpsilonDelta",
    "ExportedEntry",
    "ForkJSON",
    "Fractions",
    "GrantQuota",
    "InvocationRecord",
    "LeftItem",
    "LevelOwners",
    "LevelPart",
    "MoreOfLast",
    "OdometerReading",
    "OrganisationVerdictJSON",
    "PartitionJSON",
    "PartitionedPart",
    "PartitionedState",
    "RefusalSummary",
    "RefusedSpan",
    "SignedHead",
    "StateJSON",
    "StatementJSON",
    "StatusView",
    "Summary",
    "WitnessedJSON",
]

#: A declaration as its kind writes it (``Declaration.to_json``): ``type`` and the kind's own
#: parameters; :func:`~odometer_core.accounting.declarations.parse_declaration` reads it.
DeclarationJSON: TypeAlias = dict[str, Any]
#: A filter's configuration (:func:`~odometer_core.accounting.filters.config_to_json`): its
#: ``mode`` and the mode's own fields.
ConfigJSON: TypeAlias = dict[str, Any]
#: A dataset's state as an entry and its row hold it: a filter's
#: (:func:`~odometer_core.accounting.filters.state_to_json`, the mode's own running totals) or
#: a partitioned dataset's (:class:`PartitionedState`); read, never changed in place.
StateJSON: TypeAlias = Mapping[str, Any]
#: An amount in the mode's units (:func:`~odometer_core.accounting.amounts.amount_json`):
#: ``epsilon``, ``delta``, ``rho``, ``mu_squared`` as decimal text, or an RDP curve
#: (``orders``, ``rdp``).
AmountJSON: TypeAlias = dict[str, Any]


# ---------------------------------------------------------------------------- readings
class EpsilonDelta(TypedDict):
    """An (ε, δ) as decimal text (a summary's ``guarantee``)."""

    epsilon: str
    delta: str


class OdometerReading(TypedDict):
    """A certified odometer reading
    (:meth:`~odometer_core.accounting.odometer.Reading.to_json`): a status's ``odometer``, a
    partitioned dataset's maintained ``highest``."""

    epsilon: str
    delta: str
    certified: bool
    source: str
    level: int | None
    ladder_epsilon: str | None
    theorem: str


class StatusView(TypedDict):
    """What every mode's status (:func:`~odometer_core.accounting.filters.status`) holds: its
    ``mode``, its ``budget`` and the certified ``odometer`` reading. The mode's own figures
    (``spent``, ``remaining``, ``sub_budgets`` …) are its mode's to say: code that reads them
    takes the status as a ``Mapping[str, Any]``."""

    mode: str
    budget: EpsilonDelta
    odometer: OdometerReading


# ---------------------------------------------------------------------------- summaries
class LeftItem(TypedDict):
    """What is left of one bound (:func:`~odometer_core.accounting.summary.left_of`)."""

    unit: str
    amount: str
    budget: str
    fraction: str
    order: NotRequired[str | None]  # rdp
    sub_budget: NotRequired[str]  # split


class MoreOfLast(TypedDict):
    """How many more of the last declaration fit (``summary.more``)."""

    count: int
    at_least: bool
    of: DeclarationJSON
    sub_budget: NotRequired[str]


class Fractions(TypedDict):
    """The one fraction of a budget spent and what is left of it
    (:func:`~odometer_core.accounting.summary.fractions`)."""

    fraction_spent: str
    fraction_left: str


class Summary(TypedDict):
    """A budget summed up (:func:`~odometer_core.accounting.summary.compose`)."""

    text: str
    guarantee: EpsilonDelta
    fraction_spent: str
    fraction_left: str
    left: list[LeftItem]
    more: MoreOfLast | None


class RefusalSummary(TypedDict):
    """A refusal summed up (:func:`~odometer_core.accounting.summary.refusal`)."""

    text: str
    level: str
    bound: str
    guarantee: EpsilonDelta
    fraction_spent: str
    fraction_left: str
    left: list[LeftItem]
    instead: DeclarationJSON | None
    alternatives: list[DeclarationJSON]


class CapacityJSON(TypedDict):
    """How many more of a declaration a filter admits in a row
    (:meth:`~odometer_core.accounting.filters.Capacity.to_json`): ``at_least`` when counting
    stopped at its limit; ``reason`` why the next one is refused (or cannot be counted)."""

    count: int
    at_least: bool
    reason: str | None


class Attribution(TypedDict):
    """The (ε, δ) of some charges alone (:meth:`~odometer_core.accounting.summary.Spend.
    attribution`): never certified."""

    epsilon: str
    delta: str
    certified: bool


class CurveJSON(TypedDict):
    """A summed RDP curve (:meth:`~odometer_core.accounting.summary.Spend.curve_json`)."""

    orders: list[str]
    rdp: list[str]


# ---------------------------------------------------------------------------- organisations' caps
class ClosedPhaseJSON(TypedDict):
    """A cap replaced after it counted (:meth:`~odometer_core.accounting.levels.ClosedPhase.
    to_json`): its mode, its certified reading when it was replaced, and the cap's ``seq``
    after which it was."""

    mode: str
    epsilon: str
    delta: str
    after_seq: int


class StatementJSON(TypedDict):
    """An organisation's (ε, δ) across cap replacements
    (:func:`~odometer_core.accounting.levels.statement_sum`) and how many phases it sums."""

    epsilon: str
    delta: str
    phases: int


# ---------------------------------------------------------------------------- the ledger
class CapOrder(TypedDict, total=False):
    """What an entry that touches an organisation's cap records of its order across the
    organisation's datasets (:func:`~odometer_core.accounting.levels.cap_order`): the cap's
    ``seq`` always; the configuration in force and its state before the first time after
    the cap was set or changed; the phase it replaced just before. Empty for a quota."""

    seq: int
    config: ConfigJSON
    before: StateJSON
    replaced: ClosedPhaseJSON


class LevelPart(TypedDict):
    """What an entry records of one level above the dataset (its ``org`` or ``quota``:
    :func:`~odometer_core.accounting.levels.level_record`, with the cap's order,
    :class:`CapOrder`, on an organisation's), or of a quota share dropped when its grant is
    gone (``outcome`` ``dropped``, nothing charged, no state). ``budget``: the cap's ε and δ
    on a registration; ``grant``: the quota's grant (its ``granted_seq``) when known."""

    id: str
    outcome: str
    applied: bool
    charge: AmountJSON | None
    requested: AmountJSON | None
    refund: AmountJSON | None
    reservation: dict[str, Any] | None  # the reservation's fields, by its mode
    state: StateJSON | None
    budget: NotRequired[EpsilonDelta]
    grant: NotRequired[int]
    seq: NotRequired[int]
    config: NotRequired[ConfigJSON]
    before: NotRequired[StateJSON]
    replaced: NotRequired[ClosedPhaseJSON]


class EntryPayload(TypedDict):
    """A ledger entry's hashed fields (:meth:`~odometer_core.ledger.entry.Entry.payload`), in
    :data:`~odometer_core.ledger.chain.PAYLOAD_FIELDS`' order."""

    dataset_id: str
    seq: int
    kind: str
    invocation_id: str | None
    actor: str
    at: str
    accounting_version: str
    declaration: DeclarationJSON | None
    request: dict[str, Any] | None  # the kind's own request: its entry kind says which
    charge: AmountJSON | None
    requested: AmountJSON | None
    refund: AmountJSON | None
    reservation: dict[str, Any] | None  # the reservation's fields, by its mode
    reason: str | None
    config: ConfigJSON | None
    state: StateJSON
    org: LevelPart | None
    quota: LevelPart | GrantQuota | None
    prev_hash: str


class ExportedEntry(EntryPayload):
    """A ledger entry as stored, exported and verified
    (:meth:`~odometer_core.ledger.entry.Entry.to_export`): the payload and its ``hash``."""

    hash: str


class LevelOwners(TypedDict, total=False):
    """An invocation's ``levels`` (:class:`InvocationRecord`): who holds its charge or
    reservation above the dataset. A registration writes ``organisation`` and ``quota`` (each
    null when that level holds nothing) and ``quota_grant`` only when a quota holds it; rows
    written before the levels were recorded hold null instead, so readers use ``get``."""

    organisation: str | None
    quota: str | None
    quota_grant: int


class InvocationRecord(TypedDict):
    """An invocation as a registration records it, by the ``invocations`` row's column names
    (:func:`odometer_core.ledger.admission.admit`): the declaration, request, charge and
    reservation are the ledger entry's own (:class:`EntryPayload`)."""

    id: str
    dataset_id: str
    status: str
    kind: str
    ledger: str | None  # the sub-budget spent (the column kept its first name)
    declaration: DeclarationJSON
    request: dict[str, Any]
    charge: AmountJSON  # ``{}`` when no level charged it
    requested: AmountJSON
    refund: None  # null until a settle or cancel
    reservation: dict[str, Any] | None
    cell: None  # null until a settle
    reason: str | None
    actor: str
    created_at: str
    updated_at: str
    levels: LevelOwners


class CheckpointRecord(TypedDict):
    """A signed statement of a chain head as stored and served
    (:meth:`odometer_core.ledger.checkpoints.Signer.checkpoint`)."""

    dataset_id: str
    seq: int
    head_hash: str
    signed_at: str
    key_id: str
    signature: str


class GrantQuota(TypedDict):
    """What a ``grant_changed`` entry records of the analyst's quota (its ``quota``): the
    analyst, and the quota's configuration and initial state (both null: no quota, or the
    grant revoked)."""

    id: str
    config: ConfigJSON | None
    state: StateJSON | None


# ---------------------------------------------------------------------------- partitions
class PartitionJSON(TypedDict):
    """A stored partition (:meth:`~odometer_core.partition.Partition.to_json`)."""

    kind: str
    unit: Literal["record", "person"]
    timezone: NotRequired[str]
    buckets: NotRequired[int]
    names: NotRequired[list[str]]
    immutable_key: NotRequired[Literal[True]]


#: A block range as people read it (:meth:`~odometer_core.partition.Partition.keys`):
#: inclusive keys and the number of blocks.
BlockSpan = TypedDict("BlockSpan", {"from": str, "to": str, "blocks": int})


#: A refused block range in a 409 (:meth:`~odometer_core.ledger.blocks.Held.decided`): a
#: :data:`BlockSpan`, what its blocks have left and why they refused.
RefusedSpan = TypedDict(
    "RefusedSpan",
    {"from": str, "to": str, "blocks": int, "remaining": AmountJSON, "reason": str | None},
)


class PartitionedPart(TypedDict):
    """A partitioned dataset's aggregate (``state.blocks``,
    :meth:`~odometer_core.ledger.blocks.Partitioned.to_json`); ``highest`` is absent in a
    state written before it existed."""

    open: int
    runs: int
    opened: list[list[int]]
    digest: str | None
    highest: NotRequired[OdometerReading | None]


class PartitionedState(TypedDict):
    """A partitioned dataset's state, as its row and each entry's ``state`` hold it."""

    blocks: PartitionedPart


# ---------------------------------------------------------------------------- organisations
class DrawnJSON(TypedDict):
    """What one dataset drew from a cap (:meth:`~odometer_core.ledger.organisation.Drawn.
    to_json`): ``drawn`` holds its scalars as decimal text, and ``orders`` and ``rdp`` for a
    curve."""

    decisions: int
    admitted: int
    drawn: dict[str, Any]


class OrganisationVerdictJSON(TypedDict):
    """An organisation's replayed cap (:meth:`~odometer_core.ledger.organisation.
    OrganisationVerdict.to_json`)."""

    ok: bool
    decisions: int
    state: StateJSON | None
    odometer: OdometerReading | None
    problems: list[str]
    datasets: dict[str, DrawnJSON]
    closed: list[ClosedPhaseJSON]
    statement: StatementJSON | None


# ---------------------------------------------------------------------------- heads
class CheckpointAuditSummary(TypedDict):
    """What a checkpoint audit found (:meth:`~odometer_core.ledger.checkpoints.
    CheckpointAudit.summary`)."""

    key_id: str
    signed: int
    matched: int
    newest_seq: int


class EndPinJSON(TypedDict):
    """Whether an export's end is pinned (:meth:`~odometer_core.ledger.checkpoints.EndPin.
    to_json`)."""

    pinned: bool
    by: str | None
    key_id: str | None
    reason: str | None


class WitnessedJSON(TypedDict):
    """A dataset's witnessed head (:meth:`~odometer_core.ledger.witness.Witnessed.to_json`)."""

    type: str
    dataset_id: str
    seq: int
    head_hash: str
    epoch: int
    witnessed_at: str | None
    key_id: str | None
    signature: str | None


class CosignedJSON(TypedDict):
    """The last head a witness cosigned (:meth:`~odometer_core.ledger.witness.Cosigned.
    to_json`)."""

    type: str
    dataset_id: str
    epoch: int
    size: int
    root: str
    cosigned_at: int
    note: str


class SignedHead(TypedDict):
    """A cosigned tree head: its size and root (hex)."""

    size: int
    root: str


class ForkJSON(TypedDict):
    """An acknowledged loss (:meth:`~odometer_core.ledger.cosign.Fork.to_json`)."""

    seq: int
    at: str
    actor: str
    reason: str
    lost: list[int]
    witnessed_hash: str
    signed_head: SignedHead | None
