"""Tumult Analytics sessions that draw each query's budget from the odometer.

A Tumult Analytics ``Session`` keeps a budget for one session and forgets it afterwards. Its
``Session.evaluate(query, privacy_budget)`` is where the spend is known before any noise is
drawn: the budget passed is what the Session charges (after its own float adjustment, which
only rounds a request that overshoots what it has left *down* to what it has left).
:class:`OdometerSession` wraps a Session so that every ``evaluate`` is registered with the
odometer, as **one invocation per query**, before it is measured:

- **declared from the budget the Session will charge** (its compile step, which measures
  nothing, gives the adjusted budget as exact rationals; each is read *up* to a 17-digit
  decimal, so the declaration is never below what the Session charges):

  ==========================  ==========================================================
  ``PureDPBudget(ε)``         ``pure_dp`` ε
  ``ApproxDPBudget(ε, δ)``    ``approx_dp`` (ε, δ); ``pure_dp`` ε where δ = 0 (the same
                              guarantee, and the curve modes charge pure ε better)
  ``RhoZCDPBudget(ρ)``        ``zcdp`` ρ
  ==========================  ==========================================================

  An infinite budget cannot be declared (``ValueError`` before anything is sent).
- **the Session's own refusals first**: the query is compiled and held against the Session's
  remaining budget and state with Tumult's own rule (its accountant's
  ``assert_can_spend_budget``) before the registration is sent; a query the Session would
  refuse raises :class:`SessionRefused` and nothing is registered.
- **a registration the Session refused before measuring is cancelled** where the odometer can
  express the query's budget as a reservation that costs exactly what the plain declaration
  costs. The Session can still refuse after the registration (another session of a
  ``partition_and_create`` family, or another caller, spent its budget in between); only an
  open reservation (an ODP registration) can be cancelled, never an accepted charge. Per
  budget and dataset mode:

  - ``PureDPBudget`` and ``ApproxDPBudget`` on a ``basic`` dataset (a partitioned one too): the
    query is registered as an ``odp`` of two cells (:data:`CELLS`), each at the budget's ε,
    with its δ (:func:`reservation`). A ``basic`` filter reserves it at its worst cell, ε, and
    charges the δ at once: E + R + ε ≤ ε_B and D + δ ≤ δ_B, the test and the reading (E + R,
    D) of the plain ``pure_dp`` or ``approx_dp`` (Hartmann et al. 2022, Alg. 1, Thm 7). Once
    measured it is settled at ``measured``: ε charged, nothing refunded (δ never is), the
    plain declaration's charge. Refused by the Session before measuring, it is cancelled: ε
    and δ refunded, as if never registered (:class:`RegistrationCancelled`; the ledger shows
    ``invocation_reserved`` then ``invocation_cancelled``). Every level above charges it as
    the plain declaration: a ``basic`` cap or quota reserves and refunds it alike; a ``zcdp``
    or ``rdp`` cap charges an ODP registration its worst cell as (ε, δ)-DP — ε·tanh(ε/2) or
    the pure-DP curve at δ = 0, (ε²/2, δ) or that curve with δ otherwise, the charges of
    ``pure_dp`` and ``approx_dp`` — keeps it on settle and releases it on cancel; a ``gdp``
    cap refuses both.
  - ``zcdp``, ``rdp`` and ``gdp`` datasets: no reservation. Their filters admit an ODP
    registration as ``accepted`` at its worst cell (nothing to cancel; ``gdp`` refuses it), so
    the plain declaration is registered and a refusal after it raises
    :class:`ChargedNotMeasured`: the charge stands (over-charging is the safe side). A
    ``split`` dataset likewise (the wrapper names no sub-budget).
  - ``RhoZCDPBudget``: no reservation in any mode. An ODP cell states (ε, δ)-DP, not ρ-zCDP: a
    ``zcdp`` dataset would charge the cell's (ε, δ) as (ε²/2, δ), far above ρ, and accept it
    without a reservation; a ``basic`` dataset converts ρ at its conversion δ, which a cell
    could carry as (ε(ρ, δ_c), δ_c), but a ``zcdp`` or ``rdp`` cap would then charge that cell
    (ε²/2, δ_c) where it charges the ``zcdp`` declaration ρ. So ρ is declared as ``zcdp`` and a
    late refusal raises :class:`ChargedNotMeasured`.

  A reservation's key answered with a reservation since cancelled (the same query at the same
  place refused before, in this process or a restarted one) is not taken for the new one: the
  next attempt has a key of its own (:func:`idempotency_key`'s ``attempt``). A measurement
  that fails for another reason (its noise may have been drawn) is settled: the charge stands.
  A settle that fails after the query was measured leaves the reservation open, charged at the
  query's budget (``unsettled``; logged).
- **the protected change consistent with the dataset's relation**: a Session whose private
  tables are protected against adding or removing rows (``AddOneRow``, ``AddMaxRows``,
  ``AddMaxRowsInMaxGroups``) gives its ε for every pair of tables one row apart, which is what
  an ``add_remove`` dataset charges for; anything else is refused when the wrapper is made
  (:class:`RelationMismatch`): a ``replace_one`` dataset (changing one row is a removal and an
  addition, twice the ε such a Session states) and ``AddRowsWithID``. ``AddRowsWithID(id)``
  protects Tumult's ``AddRemoveKeys`` distance 1: *all* the rows of one identifier added or
  removed; two tables in which one identifier has rows on both sides, but not the same rows,
  are at distance 2 (Tumult Core's metric), where the Session's budget holds only by group
  privacy (2ε; (2ε, (1 + e^ε)δ); 4ρ). No dataset of the odometer is charged for the
  identifier's all-or-nothing change alone: a whole ``add_remove`` dataset protects one row
  (one row added to an identifier that has rows is distance 2), and a partitioned dataset
  whose ``unit`` is ``person`` (registrations with ``contribution="person"``) protects *any or
  all* of one person's records in a block added or removed (docs/accounting.md, *Blocks that
  protect persons*): removing some of an identifier's rows is distance 2 again. Either would
  be charged half the ε the Session's guarantee needs there, so both are refused: a unit the
  API states is enforced, not assumed.
- **charged once**: the registration's idempotency key is derived from the dataset, the ``run``
  label the analyst gives, the query's position among this wrapper's admitted queries, the
  query (:func:`described`: its ``KeySet`` by its rows, not by the address its ``repr`` shows)
  and the declaration, so a retried ``evaluate`` (or a restarted script that makes the same
  queries under the same label) gets the stored decision back, not a second charge. A
  restarted script measures again with fresh noise: give a new label when answers were
  already released.
- **fail closed**: the Session measures only once the odometer admitted the query; a refusal
  (:class:`QueryRefused`, a ``BudgetExceeded`` with the 409's summary and what would fit
  ``instead``), a declaration that cannot be made or a transport error leaves the query
  unmeasured and the Session's budget untouched.

``partition_and_create`` spends budget in a way this adapter does not register: it is refused.
The other attributes of the Session (``create_view``, ``describe``, ``remaining_privacy_budget``,
``stop``, …) are the Session's own.

Tumult Analytics is imported only by :meth:`OdometerSession.from_dataframe` (``pip install
tmlt.analytics``: it pins numpy < 2 and needs Java 17 for Spark); :func:`declaration`,
:func:`protected_rows`, :func:`idempotency_key` and the wrapper itself need no Tumult import.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import logging
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Any

from odometer_client.adapters._refused import AdapterRefused
from odometer_client.declarations import UP, Mechanism, approx_dp, odp, pure_dp, zcdp
from odometer_client.errors import BudgetExceeded

log = logging.getLogger(__name__)

#: Tumult's metrics under which neighbouring tables differ by added or removed rows.
_ROW_METRICS = frozenset({"SymmetricDifference"})
#: Metrics that wrap a row metric (``AddMaxRowsInMaxGroups``: rows in at most k groups).
_WRAPPING_METRICS = frozenset({"IfGroupedBy", "SumOf", "RootSumOfSquared"})


class RelationMismatch(ValueError):
    """The Session protects a change that the dataset's relation does not charge for."""


class SessionRefused(RuntimeError):
    """The Session would refuse the query (its budget, its state): nothing was registered and
    nothing measured (and :class:`RegistrationCancelled`: it refused after the registration,
    which was cancelled)."""


class QueryRefused(AdapterRefused):
    """The odometer refused the query (409): nothing was measured (``declared``: the query's
    declaration)."""

    def __init__(self, refusal: BudgetExceeded, declared: Mechanism) -> None:
        super().__init__(refusal, declared, what="the query", so="nothing was measured")


class RegistrationCancelled(SessionRefused):
    """The odometer reserved the query, then the Session refused to measure it: the reservation
    was cancelled (a full refund: ε and δ), nothing was measured. ``invocation`` the cancelled
    invocation, ``settlement`` the cancel's answer."""

    def __init__(self, invocation: Any, settlement: Any, cause: BaseException) -> None:
        super().__init__(
            f"the Session refused to measure the query after the odometer reserved it "
            f"({cause}): reservation {invocation.id} was cancelled, nothing is charged and "
            "nothing was measured"
        )
        self.invocation = invocation
        self.settlement = settlement


class ChargedNotMeasured(RuntimeError):
    """The odometer admitted the query but the Session then refused to measure it, and the
    charge could not be taken back: an accepted invocation cannot be cancelled (a dataset
    that is not ``basic``, or a ``RhoZCDPBudget``), or the cancel of a reservation failed (it
    stays open, charged at the query's budget, until cancelled). Nothing was measured."""

    def __init__(self, invocation: Any, cause: BaseException, *, reserved: bool = False) -> None:
        if reserved:
            message = (
                f"the odometer reserved invocation {invocation.id}, the Session refused to "
                f"measure the query ({cause}) and the cancel failed: the reservation stays "
                "open, charged at the query's budget (cancel it with client.cancel), and "
                "nothing was measured"
            )
        else:
            message = (
                f"the odometer charged invocation {invocation.id} but the Session refused to "
                f"measure the query ({cause}); the charge stands and nothing was measured"
            )
        super().__init__(message)
        self.invocation = invocation


# ------------------------------------------------------------------ budgets → declarations
def _exact(value: Any, what: str) -> Fraction:
    """A Tumult budget component as an exact fraction, never below it. Tumult holds budgets as
    ``ExactNumber`` (a sympy expression: a rational for every int or float budget); an
    irrational one is read through Tumult's own upward rounding to a float."""
    expr = getattr(value, "expr", None)
    if expr is not None:
        if getattr(expr, "is_Rational", False):
            return Fraction(int(expr.p), int(expr.q))
        if getattr(value, "is_finite", True) is False or getattr(expr, "is_infinite", False):
            raise ValueError(f"the {what} is infinite: no finite guarantee to declare")
        return _exact(value.to_float(round_up=True), what)
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction | Decimal):
        raise ValueError(f"the {what} is not a number: {value!r}")
    if isinstance(value, float) and value != value:
        raise ValueError(f"the {what} is NaN")
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"the {what} is infinite: no finite guarantee to declare")
    out = Fraction(value)
    if out < 0:
        raise ValueError(f"the {what} is negative: {value!r}")
    return out


def _up(value: Any, what: str) -> Decimal:
    """The budget component rounded up to a 17-digit decimal."""
    exact = _exact(value, what)
    return UP.divide(Decimal(exact.numerator), Decimal(exact.denominator)).normalize(UP)


def _kind(budget: Any) -> str:
    for cls in type(budget).__mro__:
        if cls.__name__ in ("PureDPBudget", "ApproxDPBudget", "RhoZCDPBudget"):
            return cls.__name__
    raise ValueError(
        f"not a Tumult privacy budget: {budget!r} (PureDPBudget, ApproxDPBudget or RhoZCDPBudget)"
    )


def declaration(budget: Any) -> Mechanism:
    """The declaration of a Tumult Analytics privacy budget (see the module's table): its
    ``value`` (``ExactNumber``, or a pair for ``ApproxDPBudget``) read up to 17 digits."""
    kind = _kind(budget)
    value = budget.value
    if kind == "PureDPBudget":
        return pure_dp(_up(value, "PureDPBudget's ε"))
    if kind == "RhoZCDPBudget":
        return zcdp(_up(value, "RhoZCDPBudget's ρ"))
    epsilon, delta = value
    eps = _up(epsilon, "ApproxDPBudget's ε")
    d = _up(delta, "ApproxDPBudget's δ")
    if d >= 1:
        raise ValueError("the ApproxDPBudget's δ is 1: no guarantee to declare")
    return pure_dp(eps) if d == 0 else approx_dp(eps, d)


#: The two cells of a query's reservation, both at the query's ε: the adapter never settles a
#: charge below the budget the Session spends; the one refund is the cancel of a query the
#: Session refused before measuring.
CELLS: tuple[str, str] = ("measured", "not_measured")


def reservation(declared: Mechanism) -> Mechanism | None:
    """The reservation a ``basic`` dataset charges exactly as ``declared``, or ``None`` where
    there is none (see the module): ``pure_dp`` ε and ``approx_dp`` (ε, δ) as an ``odp`` of
    two cells of ε each and the declaration's δ; a ``zcdp`` ρ has none (an ODP cell states
    (ε, δ)-DP, not ρ-zCDP)."""
    document = declared.to_json()
    if document["type"] not in ("pure_dp", "approx_dp"):
        return None
    epsilon = Decimal(document["epsilon"])
    delta = Decimal(document.get("delta", "0"))
    return odp(dict.fromkeys(CELLS, epsilon), delta if delta > 0 else None)


# ------------------------------------------------------------------ the protected change
def _rows(metric: Any) -> bool:
    name = type(metric).__name__
    if name in _ROW_METRICS:
        return True
    if name in _WRAPPING_METRICS:
        return _rows(metric.inner_metric)
    return False


def protected_rows(session: Any) -> dict[str, str]:
    """Each private table (or identifier space) of the Session with the change it protects:
    ``"rows"`` for added or removed rows (``AddOneRow``, ``AddMaxRows``,
    ``AddMaxRowsInMaxGroups``), otherwise the name of Tumult's metric (``AddRemoveKeys`` for
    ``AddRowsWithID``). Read from the Session's input metric."""
    metric = session._input_metric
    out: dict[str, str] = {}
    for key, inner in metric.key_to_metric.items():
        name = str(getattr(key, "name", key))
        out[name] = "rows" if _rows(inner) else type(inner).__name__
    return out


def check_relation(session: Any, relation: str, unit: str | None = None) -> None:
    """Refuse (:class:`RelationMismatch`) a Session whose protected change is not what the
    dataset charges for: its ``relation``, and a partitioned dataset's ``unit`` (see the
    module)."""
    changes = protected_rows(session)
    if relation != "add_remove":
        raise RelationMismatch(
            f"the dataset's relation is {relation!r}, but a Tumult Analytics Session protects "
            "added or removed rows: one changed row is a removal and an addition, twice the "
            "privacy loss the Session states. Use a dataset whose relation is 'add_remove'"
        )
    if unit == "person":
        raise RelationMismatch(
            "the dataset's blocks protect persons (unit 'person': any or all of one person's "
            "records in a block added or removed), but a Tumult Analytics Session states its "
            "budget for rows, or (AddRowsWithID) for all the rows of one identifier added or "
            "removed: removing some of them is Tumult's distance 2, twice the privacy loss "
            "the Session states. Use a dataset whose unit is 'record'"
        )
    other = {table: change for table, change in changes.items() if change != "rows"}
    if other:
        described = ", ".join(f"{t!r} ({c})" for t, c in sorted(other.items()))
        raise RelationMismatch(
            f"the Session protects {described}, not added or removed rows, which is what the "
            "dataset's relation 'add_remove' charges for (AddRowsWithID protects all the rows "
            "of one identifier added or removed: one row added to an identifier that has rows "
            "is Tumult's distance 2, twice the privacy loss the Session states). Protect rows: "
            "AddOneRow, AddMaxRows or AddMaxRowsInMaxGroups"
        )


# ------------------------------------------------------------------ the registration's key
def described(value: Any) -> Any:
    """A query expression as JSON that is the same in every process for the same query: its
    dataclasses field by field, a ``KeySet`` by its columns and its rows (sorted; a Spark
    action on the keys, which Tumult reads to evaluate the query anyway), a function by its
    module, name, bytecode's digest, closure and defaults (not the globals it reads), enums by
    name; anything else by its ``repr``, address included where it has one (then the key is
    this process's only: charged again after a restart, never one charge for two objects). A
    query's own ``repr`` names its ``KeySet`` by address, which changes with every process."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return [type(value).__name__, {f.name: described(getattr(value, f.name)) for f in fields}]
    if type(value).__name__ == "KeySet" and hasattr(value, "dataframe"):
        rows = sorted(repr(tuple(row)) for row in value.dataframe().collect())
        return ["KeySet", list(value.columns()), rows]
    if isinstance(value, Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, list | tuple | set | frozenset):
        items = [described(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, dict):
        return [[described(k), described(v)] for k, v in sorted(value.items(), key=repr)]
    if value is None or isinstance(value, str | int | bool):
        return value
    if isinstance(value, float):
        return repr(value)
    code = getattr(value, "__code__", None)
    if code is not None:
        digest = hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()
        name = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
        cells = [c.cell_contents for c in getattr(value, "__closure__", None) or ()]
        defaults = getattr(value, "__defaults__", None) or ()
        return ["function", name, digest, described(cells), described(defaults)]
    # an object known only by its address: this process's key (a restarted script is charged
    # again, never two different objects once)
    return [type(value).__name__, repr(value)]


def idempotency_key(
    dataset_id: str, run: str, position: int, query: Any, declared: Mechanism, attempt: int = 0
) -> str:
    """The registration's key: a digest of the dataset, the ``run`` label, the query's
    ``position`` among the run's admitted queries, the query (:func:`described`) and the
    declaration sent (a reservation's is not the plain declaration's); the same query at the
    same place under the same label is charged once. ``attempt`` counts the registrations of
    that query at that place that were cancelled (the Session refused them): a cancelled
    reservation is never taken for a new one."""
    expression = getattr(query, "_query_expr", query)
    document: dict[str, Any] = {
        "dataset": dataset_id,
        "run": run,
        "position": position,
        "query": described(expression),
        "declaration": declared.to_json(),
    }
    if attempt:
        document["attempt"] = attempt
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return "tumult-" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------ the wrapper
class OdometerSession:
    """A Tumult Analytics ``Session`` whose ``evaluate`` registers each query with the
    odometer before measuring it (see :mod:`odometer_client.adapters.tumult`).

    ``client`` an ``OdometerClient``, ``dataset`` a dataset (or its id: it is then read once),
    ``session`` the Session, ``run`` the label of this series of releases; ``blocks`` and
    ``conversion_delta`` are passed to every registration (a partitioned dataset's selection;
    the δ at which a ``basic`` dataset converts a zCDP charge)."""

    def __init__(
        self,
        client: Any,
        dataset: Any,
        session: Any,
        *,
        run: str,
        blocks: Any = None,
        conversion_delta: Any = None,
    ) -> None:
        if not isinstance(run, str) or not run:
            raise ValueError("name the run: run='…' labels this series of releases")
        if isinstance(dataset, str):
            dataset = client.get_dataset(dataset)
        partition = getattr(dataset, "partition", None) or {}
        check_relation(session, str(dataset.relation), partition.get("unit"))
        self.client = client
        self.dataset_id = str(dataset.id)
        self.session = session
        self.run = run
        self.blocks = blocks
        self.conversion_delta = conversion_delta
        #: whether pure and approximate budgets are registered as reservations (a ``basic``
        #: dataset: the only mode whose ODP registrations can be cancelled; see the module)
        self.reserves: bool = str(getattr(dataset, "mode", "")) == "basic"
        #: the invocations admitted so far, in order (one per measured query), the budgets'
        #: declarations and what was registered for each (the declaration, or its reservation)
        self.invocations: list[Any] = []
        self.declarations: list[Mechanism] = []
        self.registered: list[Mechanism] = []
        #: reservations cancelled because the Session refused the query after registering it
        self.cancelled: list[Any] = []
        #: reservations whose settle failed after the query was measured: still open, charged
        #: at the query's budget (settle them at ``CELLS[0]``)
        self.unsettled: list[Any] = []

    @classmethod
    def from_dataframe(
        cls,
        client: Any,
        dataset: Any,
        privacy_budget: Any,
        source_id: str,
        dataframe: Any,
        protected_change: Any,
        *,
        run: str,
        blocks: Any = None,
        conversion_delta: Any = None,
    ) -> OdometerSession:
        """``Session.from_dataframe(privacy_budget, source_id, dataframe, protected_change)``,
        wrapped (imports Tumult Analytics)."""
        session_class = _tmlt_analytics().Session
        session = session_class.from_dataframe(
            privacy_budget=privacy_budget,
            source_id=source_id,
            dataframe=dataframe,
            protected_change=protected_change,
        )
        return cls(
            client, dataset, session, run=run, blocks=blocks, conversion_delta=conversion_delta
        )

    def evaluate(self, query: Any, privacy_budget: Any) -> Any:
        """``Session.evaluate(query, privacy_budget)``, registered first: the Session's own
        checks (nothing sent), then the registration (:class:`QueryRefused`: nothing
        measured), then the measurement; on a ``basic`` dataset the registration is a
        reservation, settled once measured and cancelled if the Session refuses to measure
        (:class:`RegistrationCancelled`)."""
        adjusted = self._session_check(query, privacy_budget)
        declared = declaration(adjusted)
        reserved = reservation(declared) if self.reserves else None
        sent = declared if reserved is None else reserved
        invocation, key, status = self._register(query, declared, sent)
        try:
            result = self.session.evaluate(query, privacy_budget)
        except RuntimeError as exc:
            if not _refused_before_measuring(exc, self.session._accountant):
                self._settle(invocation, key, status)
                raise
            if status != "reserved":
                raise ChargedNotMeasured(invocation, exc) from exc
            try:
                settlement = self.client.cancel(
                    self.dataset_id, invocation, idempotency_key=f"{key}-cancel"
                )
            except Exception as cancel_exc:
                raise ChargedNotMeasured(invocation, exc, reserved=True) from cancel_exc
            self.cancelled.append(invocation)
            raise RegistrationCancelled(invocation, settlement, exc) from exc
        except Exception:
            self._settle(invocation, key, status)  # it may have measured: the charge stands
            raise
        self._settle(invocation, key, status)
        self.invocations.append(invocation)
        self.declarations.append(declared)
        self.registered.append(sent)
        return result

    def _register(self, query: Any, declared: Mechanism, sent: Mechanism) -> tuple[Any, str, str]:
        """Register ``sent``: the invocation, its key and its status now. A reservation's key
        answered with a reservation since cancelled (the same query refused by the Session at
        the same place before, in this process or an earlier one) is not taken: the next
        attempt's key registers a new one."""
        position = len(self.invocations)
        attempt = 0
        while True:
            key = idempotency_key(self.dataset_id, self.run, position, query, sent, attempt)
            try:
                invocation = self.client.register(
                    self.dataset_id,
                    sent,
                    blocks=self.blocks,
                    conversion_delta=self.conversion_delta if sent.type == "zcdp" else None,
                    idempotency_key=key,
                )
            except BudgetExceeded as exc:
                raise QueryRefused(exc, declared) from exc
            status = str(invocation.status)
            if status != "reserved":
                return invocation, key, status
            # a stored answer is replayed as it was: read what became of the reservation
            status = str(self.client.get_invocation(self.dataset_id, invocation).status)
            if status != "cancelled":
                return invocation, key, status
            attempt += 1

    def _settle(self, invocation: Any, key: str, status: str) -> None:
        """Settle a reservation at the measured cell (the query's whole budget). A failure
        leaves it open, charged at that same budget: kept in ``unsettled`` and logged."""
        if status != "reserved":
            return
        try:
            self.client.settle(
                self.dataset_id, invocation, CELLS[0], idempotency_key=f"{key}-settle"
            )
        except Exception as exc:
            self.unsettled.append(invocation)
            log.warning(
                "settling reservation %s failed (%s): it stays open, charged at the query's "
                "budget; settle it at %r",
                invocation.id,
                exc,
                CELLS[0],
            )

    def _session_check(self, query: Any, privacy_budget: Any) -> Any:
        """What the Session will charge for ``query``, from its compile step (nothing is
        measured), after checking that the Session can spend it now with its own rule."""
        accountant = self.session._accountant
        if getattr(accountant.state, "name", "") == "RETIRED":
            raise SessionRefused(
                "the Session is no longer active (stopped, or retired by partition_and_create): "
                "nothing was sent to the odometer"
            )
        _, adjusted, _ = self.session._compile_and_get_info(query._query_expr, privacy_budget)
        try:
            accountant._privacy_budget.assert_can_spend_budget(adjusted.value)
        except ValueError as exc:  # Tumult's InsufficientBudgetError
            raise SessionRefused(
                f"the Session refuses {privacy_budget!r}: it has "
                f"{self.session.remaining_privacy_budget!r} left ({exc}); nothing was sent to "
                "the odometer"
            ) from exc
        return adjusted

    def partition_and_create(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "partition_and_create spends the Session's budget without an evaluate: this "
            "adapter does not register it (partition the data before making the Session)"
        )

    def __getattr__(self, name: str) -> Any:
        """The Session's other attributes (views, schemas, ``remaining_privacy_budget``, …)."""
        if name == "session":
            raise AttributeError(name)
        return getattr(self.session, name)


#: Tumult's errors for a measurement its accountant refused before running it.
_BEFORE_MEASURING = frozenset({"InsufficientBudgetError", "InactiveAccountantError"})


def _refused_before_measuring(exc: BaseException, accountant: Any) -> bool:
    """Did ``Session.evaluate`` fail before its accountant ran the measurement? Its budget and
    state errors (raised as a ``RuntimeError`` from Tumult Core's error), or a retired
    accountant, which measures nothing."""
    cause: BaseException | None = exc
    while cause is not None:
        if type(cause).__name__ in _BEFORE_MEASURING:
            return True
        cause = cause.__cause__
    return getattr(accountant.state, "name", "") == "RETIRED"


def _tmlt_analytics() -> Any:
    try:
        return importlib.import_module("tmlt.analytics")
    except ImportError as exc:
        raise ImportError(
            "OdometerSession.from_dataframe needs Tumult Analytics: pip install tmlt.analytics "
            "(numpy < 2, Java 17)"
        ) from exc
