"""What the parts of the client's results hold: one :class:`~typing.TypedDict` per part of the
server's JSON (its OpenAPI document's schemas, ``openapi/openapi.json``), written from what the
server sends.

A part's amounts are exact decimals. Where a result parses them (the results of
:mod:`odometer_client.models`, and the tenancy results of :mod:`odometer_client.results` that
did before they were typed) they are ``Decimal``; where a result keeps them as the server wrote
them (the ledger's entries, the report, the summaries, which the server has already rounded
for display) they are decimal text, ``str``. So the parts whose amounts can be either are
generic over the number: ``Amount[Decimal]`` is a charge as ``Invocation.charge`` holds it,
``Amount[str]`` one as a ledger entry holds it.

A TypedDict costs nothing at run time (it is a plain ``dict``): these say what the dicts the
client has always returned hold; nothing here checks the server's answer (the server is the
judge of its own documents). A key a server before it did not send is ``NotRequired``; a
part the client reads as empty when the server sent none (``Dataset.blocks`` of a whole
dataset, an older server's missing ``odometer``) is ``total=False``, as is a part that readers
take as ``part or {}`` when it is ``None`` (a reading, a statement, what is reserved or lost),
so that the fallback is read as the part.

Four values are free-form and named as such (:data:`Declaration`, :data:`Config`,
:data:`EntryRequest`, :data:`State`): their keys are another document's to say, by kind or by
mode; and :data:`JSONObject` is a document as received, before the client read it."""

from decimal import Decimal
from typing import Any, Generic, Literal, NotRequired, TypeAlias, TypedDict, TypeVar

#: A number as a part holds it: ``Decimal`` (parsed) or ``str`` (the server's decimal text).
N = TypeVar("N", Decimal, str)

#: A mechanism declaration as the server writes it back (an invocation's ``mechanism``, a
#: ledger entry's ``declaration``, the ``of`` of a summary's ``more``): ``type`` and the kind's
#: own parameters. Free-form here because each kind's fields are said once, in the server's
#: field table (the document's ``Mechanism`` union), and the client passes them through.
Declaration: TypeAlias = dict[str, Any]
#: A dataset's accounting configuration as stored (``Dataset.config``): its ``mode`` and the
#: mode's own derived fields (orders, thresholds, ladders, sub-budgets …), which differ by mode
#: and by accounting version; the client shows and passes them on, never reads them.
Config: TypeAlias = dict[str, Any]
#: What a ledger entry records of the request it answers (``LedgerEntry.request``): each
#: entry kind's own fields (a registration's blocks and idempotency, a budget change's
#: target, …), hashed as written; :mod:`odometer_client.ledger` replays them.
EntryRequest: TypeAlias = dict[str, Any]
#: A budget's running totals as its mode's filter writes them (the verifier's replayed
#: ``state``): each mode's own, by accounting version; the client passes them on.
State: TypeAlias = dict[str, Any]
#: A JSON object as received (a result's ``raw``, an error's ``body``): the server's document
#: before the client read it, kept whole so that nothing it sends is lost.
JSONObject: TypeAlias = dict[str, Any]


# ---------------------------------------------------------------------------- amounts
class Amount(TypedDict, Generic[N], total=False):
    """An amount in the mode's units (``EpsilonDeltaAmount``, ``RhoDeltaAmount``,
    ``RdpAmount``, ``MuSquaredAmount``; empty when nothing was charged): ``epsilon`` and
    ``delta`` (basic), ``rho`` and ``delta`` (zCDP), ``orders``, ``rdp`` and ``delta`` (an RDP
    curve), ``mu_squared`` (GDP)."""

    epsilon: N
    delta: N
    rho: N
    mu_squared: N
    orders: list[N]
    rdp: list[N]


class EpsilonDelta(TypedDict, Generic[N]):
    """An (ε, δ): a budget, a guarantee, a cap's target."""

    epsilon: N
    delta: N


class Estimate(EpsilonDelta[N], total=False):
    """A status's ``spent_eps_delta``: (ε, δ) of the spend, ``certified`` on ``basic`` budgets,
    an ``estimate`` (the running totals converted as if fixed in advance) in curve modes."""

    certified: bool
    estimate: bool


class Reserved(TypedDict, Generic[N], total=False):
    """What open ODP reservations hold (a ``basic`` status's ``reserved``)."""

    epsilon: N
    open: int


class Cell(TypedDict, Generic[N]):
    """One cell of an ODP reservation: its name and ε."""

    name: str
    epsilon: N


class Reservation(TypedDict, Generic[N]):
    """An open ODP reservation: its cells, δ and the sub-budget it lives in."""

    sub_budget: str | None
    cells: list[Cell[N]]
    delta: N


# ---------------------------------------------------------------------------- readings
class Reading(TypedDict, Generic[N], total=False):
    """A certified odometer reading (``OdometerReading``): an (ε, δ) that holds at whatever
    point the analysts stop, which rule gave it (``source``) and the theorem it rests on."""

    epsilon: N
    delta: N
    certified: bool
    source: Literal["basic", "ladder", "pld_branch", "filter", "split"]
    level: int | None
    ladder_epsilon: N | None
    theorem: str


class Left(TypedDict, Generic[N]):
    """What is left of one bound (``LeftAmount``), in ``unit``, and the fraction it is."""

    unit: Literal["epsilon", "delta", "rho", "mu_squared", "rdp"]
    amount: N
    budget: N
    fraction: N
    order: NotRequired[N | None]
    sub_budget: NotRequired[str | None]


class MoreOfLast(TypedDict):
    """How many more of the last declaration fit (``MoreOfLast``); ``at_least``: a bound."""

    count: int
    at_least: bool
    of: Declaration
    sub_budget: NotRequired[str | None]


class SummaryShown(TypedDict):
    """A summary's fractions as the dashboard prints them (``SummaryShown``): percentages
    rounded down (``"48.48 %"``), text in either kind of result; ``left``: each left item's,
    in ``left``'s order."""

    fraction_spent: str | None
    fraction_left: str | None
    left: list[str | None]


class Summary(TypedDict, Generic[N], total=False):
    """One reading to quote (``Summary``): ``text``, the ``guarantee`` (the certified reading
    rounded up), the fractions spent and left, what is ``left`` of each bound (rounded down)
    and how many ``more`` of the last declaration fit. ``total=False``: servers before the
    fractions (or before ``more``) send fewer keys, and a reader falls back to ``{}``."""

    text: str
    guarantee: EpsilonDelta[N]
    fraction_spent: N
    fraction_left: N
    left: list[Left[N]]
    more: MoreOfLast | None
    shown: SummaryShown


class RefusalSummary(TypedDict, Generic[N], total=False):
    """A refusal summed up (``RefusalSummary``): which ``level`` and ``bound`` refused, what
    is left, and ``instead``, a declaration that fits now (``total=False``: read as
    ``summary or {}`` where a server sent none)."""

    text: str
    level: Literal["dataset", "organisation", "quota"]
    bound: str
    guarantee: EpsilonDelta[N]
    fraction_spent: N
    fraction_left: N
    left: list[Left[N]]
    instead: Declaration | None
    alternatives: list[Declaration]


class Frozen(TypedDict):
    """Why a dataset refuses writes (``FrozenStatus``): its ledger is behind the witness."""

    reason: str
    witnessed_seq: int
    database_seq: int
    sibling: NotRequired[str | None]
    reading: str
    detail: str


# ---------------------------------------------------------------------------- partitions
#: Blocks ``from`` … ``to`` (keys as the server writes them) and how many there are.
Span = TypedDict("Span", {"from": str, "to": str, "blocks": int})
#: A refused block range of a 409 (``BudgetExceeded.blocks``): a :data:`Span`, what its
#: blocks have left, and why they refused.
RefusedSpan = TypedDict(
    "RefusedSpan",
    {"from": str, "to": str, "blocks": int, "remaining": Amount[Decimal], "reason": str | None},
)


class Partition(TypedDict):
    """How a dataset is partitioned (``PartitionIn``): the ``kind`` of its blocks, what one
    block's budget protects (``unit``), and the kind's own settings."""

    kind: Literal["bucket", "day", "week", "month", "named"]
    unit: Literal["record", "person"]
    timezone: NotRequired[str]
    buckets: NotRequired[int]
    names: NotRequired[list[str]]
    immutable_key: NotRequired[bool]


class BlocksStatus(TypedDict, Generic[N], total=False):
    """A partitioned dataset's blocks in its status (``status.blocks``; empty for a whole
    dataset): what a block protects, how many are open and in how many runs, the ranges ever
    opened, and the highest fraction any open block has spent."""

    unit: str
    protects: str
    requires: str | None
    open: int
    runs: int
    opened: list[Span]
    highest_fraction_spent: N


class Fit(TypedDict):
    """How many more of a declaration fit in a row (``Fit``: ``count``; ``at_least``: the count
    stopped at its limit), what the next one would be refused for, and, in a preview's ``fit``,
    the ``level`` that admits the fewest (absent from a block preview's, where every selected
    block is one level)."""

    count: int
    at_least: bool
    reason: str | None
    level: NotRequired[Literal["dataset", "organisation", "quota"]]


# ---------------------------------------------------------------------------- statuses
class ShownReading(TypedDict, Generic[N]):
    """A certified reading rounded up to 8 significant digits (``ShownReading``)."""

    epsilon: N
    delta: N


class ShownCounted(TypedDict, Generic[N]):
    """What a status's filter counts, in one ``unit``, rounded for display (``ShownCounted``):
    spent and reserved up, what remains and the budget down; ``remaining_exact`` unrounded."""

    unit: Literal["epsilon", "rho", "mu_squared"]
    spent: N
    reserved: N
    remaining: N
    budget: N
    remaining_exact: N


#: An amount's display text, unit by unit (``{"epsilon": "0.215101", "delta": "0"}``): each
#: scalar unit rounded by the server to 6 significant digits, up for what was spent, down for
#: the rest (an rdp curve has none). Where a document carries an amount ``X``, its
#: ``shown[X]`` is this.
AmountText = dict[str, str]


class StatusShown(TypedDict, Generic[N], total=False):
    """A status's figures as the dashboard prints them (``StatusShown``): the reading, what the
    filter counts (``None`` for ``split``: see ``sub_budgets``), the fraction spent as a
    percentage (text, ``"48.48 %"``) and as a decimal (``fraction_spent_exact``)."""

    reading: ShownReading[N] | None
    counted: ShownCounted[N] | None
    estimate_above: bool
    fraction_spent: str | None
    fraction_spent_exact: N | None
    sub_budgets: dict[str, "StatusShown[N]"] | None
    budget: AmountText | None
    spent: AmountText | None
    spent_eps_delta: AmountText | None
    reserved: AmountText | None
    remaining: AmountText | None


class Status(TypedDict, Generic[N], total=False):
    """A budget's status (``DatasetStatus``, an organisation's cap, a block run's): the mode,
    its ``budget``, the certified ``odometer`` reading and a ``summary`` in every mode; the
    mode's own figures beside them — ``spent``, ``reserved`` and ``remaining`` in its units,
    ``spent_eps_delta``, a ``split`` dataset's ``sub_budgets`` (each a status), a partitioned
    dataset's ``blocks``, an ``rdp`` status's ``orders`` and ``thresholds`` (the budget per
    order) and, where the first declaration chose them, its ``weights``; ``shown``, its figures
    as the dashboard prints them; ``frozen`` when its ledger is behind the witness. Which keys
    a status has depends on its mode, hence ``total=False``."""

    mode: str
    budget: EpsilonDelta[N]
    odometer: Reading[N]
    summary: Summary[N]
    frozen: Frozen | None
    spent: Amount[N]
    reserved: Reserved[N]
    remaining: Amount[N]
    spent_eps_delta: Estimate[N]
    conversion_delta: N
    final_conversion_delta: N
    delta_approx: N
    rho_budget: N
    mu_squared_budget: N
    orders: list[N]
    thresholds: list[N]
    weights: list[N]
    sub_budgets: dict[str, "Status[N]"]
    per_block: bool
    blocks: BlocksStatus[N]
    shown: StatusShown[N]


# ---------------------------------------------------------------------------- tenancy
class Cap(TypedDict, Generic[N]):
    """An organisation's cap in force: its target and mode."""

    epsilon: N
    delta: N
    mode: str


class ClosedCap(TypedDict, Generic[N]):
    """A cap replaced after it counted (``ClosedCap``): its mode, its certified reading then,
    and the cap's ``seq`` after which it was."""

    mode: str
    epsilon: N
    delta: N
    after_seq: int


class Statement(TypedDict, Generic[N], total=False):
    """An organisation's (ε, δ) across cap replacements (``OrganisationStatement``) and how
    many phases it sums, with a sentence that says so."""

    epsilon: N
    delta: N
    phases: int
    note: NotRequired[str]


class Unusable(TypedDict, Generic[N]):
    """Why a quota can never admit anything, the fix, and a budget (ε, δ) that would."""

    reason: str
    fix: str
    budget: EpsilonDelta[N]


class Quota(TypedDict, Generic[N]):
    """A grant's quota as set: its (ε, δ) and, when it can never admit anything, why."""

    epsilon: N
    delta: N
    unusable: NotRequired[Unusable[N]]


class MyQuota(TypedDict, Generic[N]):
    """An analyst's quota as ``whoami`` shows it (``QuotaOut``): its budget and its reading."""

    budget: EpsilonDelta[N]
    summary: Summary[N]
    shown: NotRequired[dict[str, AmountText]]


class MyGrant(TypedDict):
    """One of an analyst's grants (``MyGrant``), amounts parsed."""

    dataset_id: str
    dataset_name: str | None
    quota: MyQuota[Decimal] | None


class SignedHead(TypedDict):
    """A cosigned tree head: its size and root (hex)."""

    size: int
    root: str


class Lost(TypedDict, total=False):
    """The entries an acknowledged loss gave up: the witness's head and the database's, and
    the last head the witness cosigned before the loss (``signed_head``, when there is one)."""

    witnessed_seq: int
    witnessed_hash: str
    database_seq: int
    signed_head: SignedHead | None


# ---------------------------------------------------------------------------- the report
class ReportDataset(TypedDict):
    """Whose report (``ReportDataset``)."""

    id: str
    name: str
    organisation: str
    relation: str
    mode: str


class Guarantee(TypedDict):
    """The dataset's guarantee (``Guarantee``): its mode, relation, budget and configuration."""

    mode: str
    relation: str
    budget: EpsilonDelta[str]
    config: Config
    certified: bool


class SpendPoint(TypedDict):
    """One point of the spend series (``SpendPointOut``), in the series' unit."""

    seq: int
    at: str
    spent: str
    budget: str
    spent_delta: str
    budget_delta: str
    reserved: str


class SpendSeries(TypedDict):
    """The spend over the ledger (``SpendSeries``), one point every ``stride`` entries."""

    unit: str
    stride: int
    points: list[SpendPoint]


class Curve(TypedDict):
    """A summed RDP curve (``RdpCurve``)."""

    orders: list[str]
    rdp: list[str]


class Attribution(TypedDict):
    """The (ε, δ) of some charges alone (``Attribution``): never certified."""

    epsilon: str
    delta: str
    certified: bool


class DecisionTotals(TypedDict):
    """What a group of invocations charged and was refunded, and their decisions: the part a
    report's rows by mechanism and by analyst share (:class:`MechanismTotals`,
    :class:`AnalystTotals`)."""

    charged: dict[str, str]
    refunded: dict[str, str]
    attribution: NotRequired[Attribution | None]
    curve: NotRequired[Curve | None]
    accepted: int
    reserved: int
    rejected: int
    settled: int
    cancelled: int


class MechanismTotals(DecisionTotals):
    """What one kind of mechanism charged and was refunded, and its decisions
    (``MechanismTotalsOut``)."""

    kind: str


class AnalystTotals(DecisionTotals):
    """What one analyst charged and was refunded, and their decisions (``AnalystTotalsOut``)."""

    actor: str
    name: str | None
    curve_charges: int


class Refunds(TypedDict):
    """Refunds in total and what ODP saved (``Refunds``)."""

    total: dict[str, str]
    odp_savings: dict[str, str]


class Rejections(TypedDict):
    """Rejections in total, by level and by reason (``Rejections``)."""

    total: int
    by_level: dict[str, int]
    by_reason: dict[str, int]


class LedgerSummary(TypedDict):
    """How many entries the ledger holds, by kind (``LedgerSummary``)."""

    entries: int
    kinds: dict[str, int]


class ChainHead(TypedDict):
    """The hash chain's head (``ChainHead``)."""

    seq: int
    hash: str


class Verification(TypedDict, total=False):
    """The replay of the whole ledger (``Verification``): ``ok`` and what it found (empty when
    the report was asked for without it)."""

    ok: bool
    entries: int
    head_hash: str
    first_problem: str | None
    problem_count: int
    problems: list[str]


#: A run of open blocks as the server wrote it (``BlockRun``).
RunText = TypedDict(
    "RunText",
    {
        "from": str,
        "to": str,
        "blocks": int,
        "fraction_spent": str,
        "status": Status[str],
        "shown": NotRequired[StatusShown[str]],
    },
)


class BlocksPageText(TypedDict):
    """A page of a partitioned dataset's blocks as the server wrote it (``BlocksPage``)."""

    dataset_id: str
    partition: Partition
    open: int
    runs: list[RunText]
    next: str | None
