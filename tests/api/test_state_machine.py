"""Stateful property test of the HTTP API against an exact reference model.

A ``hypothesis`` rule-based state machine drives the in-process app (SQLite and PostgreSQL):
it creates datasets (``basic`` with pure/approximate DP and ODP declarations; ``zcdp`` with
zCDP and Gaussian declarations), registers, previews, settles, cancels, changes budgets and
replays idempotent requests. A reference model keeps every budget in ``fractions.Fraction``:

* ``basic`` (docs/accounting.md): admit iff E + R + ε_i ≤ ε_B and D + δ_i ≤ δ_B; an ODP
  declaration reserves its worst cell ε̄ and charges δ; settling to cell k moves ε̄ out of R and
  ε_k into E (δ is never refunded); cancelling returns ε̄ and δ; a budget change is refused
  (409) below E + R or D.
* ``zcdp`` (§3.2): ρ_i = ξ + ρ for zCDP declarations and Δ²/(2σ²) for Gaussians (chosen so
  that the value is an exact decimal); admit iff Σρ + ρ_i ≤ ρ_B and Σδ + δ_i ≤ δ_A with
  δ_A = δ_B − δ_c, and an approximate one only while δ_B is at least the filter's creation δ_B.
  ρ_B comes from a transcendental conversion, so the model takes it from the dataset at
  creation; everything after that is exact. Budget changes keep ε_B and δ_c (so ρ_B is
  unchanged); before the first charge they make the filter anew (δ_A moves with δ_B), after it
  δ_A stays, δ_B may not go below δ_c, nor below the creation δ_B once approximate δ was spent
  (docs/accounting.md, *Budget changes*).

Declarations are restricted to those whose charge is exactly predictable. After every step the
invariants compare the API's spent/reserved/remaining with the model exactly, check that no
budget is exceeded and that each dataset's ledger (fetched over HTTP) replays through the
accounting core to the stored state with an intact hash chain.

Shown able to fail: with ``app.services.reservations.accounting_cancel`` monkeypatched to
forget the δ refund of a cancelled reservation, the machine fails after register odp → cancel
with "cancel refund {'epsilon': '0.25', 'delta': '0'}, reserved delta 1/10000" (and, without
that check in the rule, with "spent delta: api … != model …" from the invariant);
``test_the_machine_catches_a_forgotten_refund`` keeps that proof in the suite (the same rules
and invariants with every ``basic`` declaration a two-cell ODP, so the broken path is reached at
once; SQLite only: the proof is about the test, not the backend).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from app.services import reservations as invocation_service
from odometer_core.accounting import make_config
from odometer_core.accounting.exact import ZERO
from odometer_core.accounting.modes import zcdp as zcdp_mode
from odometer_core.ledger.replay import Replayer
from tests.support import AUTH, Backend

LONG = os.environ.get("ODOMETER_LONG_TESTS") == "1"
MACHINE_SETTINGS = settings(
    max_examples=150 if LONG else 12,
    stateful_step_count=50 if LONG else 20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

EPSILONS = ["0.05", "0.1", "0.125", "0.2", "0.25", "0.5"]
DELTAS = ["0", "0.0000001", "0.0001", "0.00025"]
RHOS = ["0.001", "0.005", "0.01", "0.02"]
#: (σ, Δ) whose ρ = Δ²/(2σ²) is an exact decimal
GAUSSIANS = [("1", "1"), ("2", "1"), ("5", "1"), ("10", "2"), ("4", "1")]


def frac(text: str) -> Fraction:
    return Fraction(Decimal(text))


@dataclass
class Model:
    """One dataset's budget in exact rationals."""

    id: str
    mode: str
    epsilon: Fraction
    delta: Fraction
    # basic
    spent_epsilon: Fraction = Fraction(0)
    spent_delta: Fraction = Fraction(0)
    reserved_epsilon: Fraction = Fraction(0)
    open: int = 0
    # zcdp
    rho_budget: Fraction = Fraction(0)
    final_conversion_delta: Fraction = Fraction(0)
    #: δ_A and the δ_B the filter was made with (made anew by a change before the first
    #: charge; fixed from then on: docs/accounting.md, *Budget changes*)
    delta_approx: Fraction = Fraction(0)
    creation_delta: Fraction = Fraction(0)
    rho: Fraction = Fraction(0)
    zdelta: Fraction = Fraction(0)
    #: reserved invocation id → (cells, δ)
    reservations: dict[str, tuple[dict[str, Fraction], Fraction]] = field(default_factory=dict)

    def fresh(self) -> bool:
        return self.rho == 0 and self.zdelta == 0

    def rho_top(self, c: Fraction) -> Fraction:
        """The ρ threshold a zcdp declaration of ρ ``c`` meets: from accounting 1.9.0 a fresh
        filter's first declaration shapes its ladder, and is admitted by the level 1 of that
        shape (``zcdp.chosen_shape``, ``zcdp.level_one``: a function of the target ε, δ_c and
        ``c`` alone); after it, the threshold the first admission fixed."""
        if not self.fresh() or c <= 0:
            return self.rho_budget

        def dec(x: Fraction) -> Decimal:
            return Decimal(x.numerator) / Decimal(x.denominator)

        config = make_config(
            dec(self.epsilon),
            dec(self.delta),
            "add_remove",
            {"mode": "zcdp", "final_conversion_delta": str(dec(self.final_conversion_delta))},
        )
        assert isinstance(config, zcdp_mode.ZCDPConfig)
        shape = zcdp_mode.chosen_shape(config, dec(c))
        if shape is None:
            return self.rho_budget
        top = zcdp_mode.level_one(dec(self.epsilon), config.final_conversion_delta, shape)
        return Fraction(str(top))

    def admits(self, cost: tuple[Fraction, Fraction]) -> bool:
        c, d = cost
        if self.mode == "basic":
            return (
                self.spent_epsilon + self.reserved_epsilon + c <= self.epsilon
                and self.spent_delta + d <= self.delta
            )
        # approximate declarations need the creation budget in force (the creation filter)
        approximate_ok = self.zdelta + d == 0 or self.delta >= self.creation_delta
        return (
            self.rho + c <= self.rho_top(c)
            and self.zdelta + d <= self.delta_approx
            and approximate_ok
        )


@dataclass(frozen=True)
class Keyed:
    """A registration sent with an Idempotency-Key and the response it got."""

    dataset: str
    key: str
    body: dict[str, Any]
    status: int
    response: bytes


class ApiMachine(RuleBasedStateMachine):
    client: TestClient  # set by the test before running

    datasets = Bundle("datasets")
    reserved = Bundle("reserved")
    keyed = Bundle("keyed")

    def __init__(self) -> None:
        super().__init__()
        self.models: dict[str, Model] = {}
        #: datasets the last step may have changed (the invariants look at these)
        self.touched: set[str] = set()
        #: per dataset: an incremental replay of its ledger and the last sequence number fed
        self.replayers: dict[str, tuple[Replayer, int]] = {}
        self.last_keyed: Keyed | None = None

    # ----------------------------------------------------------------- helpers
    def post(self, url: str, body: Any, key: str | None = None) -> Any:
        headers = {**AUTH, "Idempotency-Key": key} if key else AUTH
        return self.client.post(url, json=body, headers=headers)

    def cost(self, m: Model, mechanism: dict[str, Any]) -> tuple[Fraction, Fraction]:
        kind = mechanism["type"]
        if kind == "pure_dp":
            return frac(mechanism["epsilon"]), Fraction(0)
        if kind == "approx_dp":
            return frac(mechanism["epsilon"]), frac(mechanism["delta"])
        if kind == "odp":
            worst = max(frac(c["epsilon"]) for c in mechanism["cells"])
            return worst, frac(mechanism.get("delta", "0"))
        if kind == "zcdp":
            return frac(mechanism["rho"]) + frac(mechanism.get("xi", "0")), frac(
                mechanism.get("delta", "0")
            )
        assert kind == "gaussian"
        ratio = frac(mechanism["sensitivity"]) / frac(mechanism["sigma"])
        return ratio * ratio / 2, Fraction(0)

    def apply(self, m: Model, mechanism: dict[str, Any], inv: str) -> None:
        c, d = self.cost(m, mechanism)
        if m.mode == "zcdp":
            m.rho_budget = m.rho_top(c)  # fixed by the first admission (accounting 1.9.0)
            m.rho += c
            m.zdelta += d
        elif mechanism["type"] == "odp" and len(mechanism["cells"]) > 1:
            m.reserved_epsilon += c
            m.spent_delta += d
            m.open += 1
            cells = {cell["name"]: frac(cell["epsilon"]) for cell in mechanism["cells"]}
            m.reservations[inv] = (cells, d)
        else:
            m.spent_epsilon += c
            m.spent_delta += d

    # ----------------------------------------------------------------- rules
    @initialize(target=datasets)
    def first_dataset(self) -> Any:
        return self.make_dataset("basic", "1", "0.001")

    @rule(
        target=datasets,
        mode=st.sampled_from(["basic", "zcdp"]),
        epsilon=st.sampled_from(["0.5", "1", "1.5"]),
        delta=st.sampled_from(["0.001", "0.0005"]),
    )
    def create_dataset(self, mode: str, epsilon: str, delta: str) -> Any:
        return self.make_dataset(mode, epsilon, delta)

    def make_dataset(self, mode: str, epsilon: str, delta: str) -> str:
        body: dict[str, Any] = {"name": "sm", "budget": {"epsilon": epsilon, "delta": delta}}
        if mode == "zcdp":
            body["accounting"] = {"mode": "zcdp", "final_conversion_delta": "0.0004"}
        r = self.post("/v1/datasets", body)
        assert r.status_code == 201, r.text
        out = r.json()
        m = Model(out["id"], mode, frac(epsilon), frac(delta))
        if mode == "zcdp":
            m.rho_budget = frac(out["status"]["rho_budget"])
            m.final_conversion_delta = frac("0.0004")
            m.delta_approx = m.delta - m.final_conversion_delta
            m.creation_delta = m.delta
            assert m.rho_budget > 0
        self.models[m.id] = m
        self.touched.add(m.id)
        return m.id

    def mechanisms(self, mode: str) -> st.SearchStrategy[dict[str, Any]]:
        if mode == "zcdp":
            return st.one_of(
                st.builds(
                    lambda r, x, d: {"type": "zcdp", "rho": r, "xi": x, "delta": d},
                    st.sampled_from(RHOS),
                    st.sampled_from(["0", "0.001"]),
                    st.sampled_from(DELTAS),
                ),
                st.sampled_from(GAUSSIANS).map(
                    lambda g: {"type": "gaussian", "sigma": g[0], "sensitivity": g[1]}
                ),
            )
        cells = st.lists(st.sampled_from(EPSILONS), min_size=1, max_size=4).map(
            lambda es: [{"name": f"c{i}", "epsilon": e} for i, e in enumerate(es)]
        )
        odp = st.builds(
            lambda c, d: {"type": "odp", "cells": c, "delta": d}, cells, st.sampled_from(DELTAS)
        )
        return st.one_of(
            odp,  # twice: reservations (settle, cancel, refunds) are where the risk is
            odp,
            st.sampled_from(EPSILONS).map(lambda e: {"type": "pure_dp", "epsilon": e}),
            st.builds(
                lambda e, d: {"type": "approx_dp", "epsilon": e, "delta": d},
                st.sampled_from(EPSILONS),
                st.sampled_from(DELTAS),
            ),
        )

    @rule(target=reserved, dataset=datasets, data=st.data(), keyed=st.booleans())
    def register(self, dataset: str, data: st.DataObject, keyed: bool) -> Any:
        m = self.models[dataset]
        self.touched.add(dataset)
        mechanism = data.draw(self.mechanisms(m.mode))
        body = {"mechanism": mechanism}
        key = uuid.uuid4().hex if keyed else None
        expected = m.admits(self.cost(m, mechanism))
        r = self.post(f"/v1/datasets/{dataset}/invocations", body, key)
        assert r.status_code == (201 if expected else 409), (mechanism, r.text)
        if key:
            self.last_keyed = Keyed(dataset, key, body, r.status_code, r.content)
        if not expected:
            assert r.json()["error"] == "BudgetExceeded"
            return multiple()
        inv = r.json()["id"]
        self.apply(m, mechanism, inv)
        return inv if inv in m.reservations else multiple()

    @rule(dataset=datasets, data=st.data())
    def preview(self, dataset: str, data: st.DataObject) -> None:
        m = self.models[dataset]
        mechanism = data.draw(self.mechanisms(m.mode))
        r = self.post(f"/v1/datasets/{dataset}/invocations/preview", {"mechanism": mechanism})
        assert r.status_code == 200, r.text
        admitted = m.admits(self.cost(m, mechanism))
        assert (r.json()["status"] != "rejected") == admitted, (mechanism, r.text)

    def owner(self, inv: str) -> Model:
        m = next(m for m in self.models.values() if inv in m.reservations)
        self.touched.add(m.id)
        return m

    @rule(inv=consumes(reserved), data=st.data())
    def settle(self, inv: str, data: st.DataObject) -> None:
        m = self.owner(inv)
        cells, _ = m.reservations.pop(inv)
        cell = data.draw(st.sampled_from(sorted(cells)))
        r = self.post(f"/v1/datasets/{m.id}/invocations/{inv}/settle", {"cell": cell})
        assert r.status_code == 200, r.text
        worst = max(cells.values())
        assert frac(r.json()["refund"]["epsilon"]) == worst - cells[cell]
        assert frac(r.json()["refund"]["delta"]) == 0
        m.reserved_epsilon -= worst
        m.spent_epsilon += cells[cell]
        m.open -= 1
        again = self.post(f"/v1/datasets/{m.id}/invocations/{inv}/settle", {"cell": cell})
        assert again.status_code == 409, again.text  # no second settlement without a key

    @rule(inv=consumes(reserved))
    def cancel(self, inv: str) -> None:
        m = self.owner(inv)
        cells, d = m.reservations.pop(inv)
        r = self.post(f"/v1/datasets/{m.id}/invocations/{inv}/cancel", None)
        assert r.status_code == 200, r.text
        refund = r.json()["refund"]
        assert frac(refund["epsilon"]) == max(cells.values()), f"cancel refund {refund}"
        assert frac(refund["delta"]) == d, f"cancel refund {refund}, reserved delta {d}"
        m.reserved_epsilon -= max(cells.values())
        m.spent_delta -= d
        m.open -= 1

    @rule(
        dataset=datasets,
        epsilon=st.sampled_from(["0.25", "0.5", "1", "2"]),
        delta=st.sampled_from(["0.0004", "0.0005", "0.001", "0.002"]),
    )
    def change_budget(self, dataset: str, epsilon: str, delta: str) -> None:
        m = self.models[dataset]
        self.touched.add(dataset)
        url = f"/v1/datasets/{dataset}/budget"
        fresh = m.rho == 0 and m.zdelta == 0
        if m.mode == "zcdp":  # keep ε_B and δ_c: ρ_B stays
            body = {
                "epsilon": str(Decimal(m.epsilon.numerator) / m.epsilon.denominator),
                "delta": delta,
                "final_conversion_delta": "0.0004",
            }
            # before the first charge the filter is made anew (δ_A moves with δ); after it δ_A
            # stays, δ holds the readings' δ_c, and once approximate δ was spent the creation δ
            ok = fresh or (
                frac(delta) >= m.final_conversion_delta
                and (m.zdelta == 0 or frac(delta) >= m.creation_delta)
            )
        else:
            body = {"epsilon": epsilon, "delta": delta}
            ok = m.spent_epsilon + m.reserved_epsilon <= frac(epsilon) and m.spent_delta <= frac(
                delta
            )
        r = self.client.patch(url, json=body, headers=AUTH)
        assert r.status_code == (200 if ok else 409), (body, r.text)
        if ok:
            m.delta = frac(delta)
            if m.mode == "basic":
                m.epsilon = frac(epsilon)
            else:
                assert frac(r.json()["status"]["rho_budget"]) == m.rho_budget
                if fresh:
                    m.delta_approx = m.delta - m.final_conversion_delta
                    m.creation_delta = m.delta
        else:
            assert r.json()["error"] == "BudgetBelowSpent"

    @precondition(lambda self: self.last_keyed is not None)
    @rule(same_body=st.booleans())
    def replay_keyed(self, same_body: bool) -> None:
        """Same key, same body: the stored response byte for byte, no second effect; same key,
        another body: 422."""
        k = self.last_keyed
        assert k is not None
        self.touched.add(k.dataset)
        body = k.body if same_body else {"mechanism": {"type": "pure_dp", "epsilon": "0.001"}}
        r = self.post(f"/v1/datasets/{k.dataset}/invocations", body, k.key)
        if same_body:
            assert (r.status_code, r.content) == (k.status, k.response)
            assert r.headers.get("Idempotent-Replayed") == "true"
        else:
            assert r.status_code == 422, r.text
            assert r.json()["error"] == "IdempotencyKeyReused"

    # ----------------------------------------------------------------- invariants
    @invariant()
    def api_equals_model(self) -> None:
        for m in (self.models[d] for d in sorted(self.touched)):
            r = self.client.get(f"/v1/datasets/{m.id}", headers=AUTH)
            assert r.status_code == 200, r.text
            s = r.json()["status"]
            if m.mode == "basic":
                pairs = {
                    "spent epsilon": (s["spent"]["epsilon"], m.spent_epsilon),
                    "spent delta": (s["spent"]["delta"], m.spent_delta),
                    "reserved epsilon": (s["reserved"]["epsilon"], m.reserved_epsilon),
                    "remaining epsilon": (
                        s["remaining"]["epsilon"],
                        m.epsilon - m.spent_epsilon - m.reserved_epsilon,
                    ),
                    "remaining delta": (s["remaining"]["delta"], m.delta - m.spent_delta),
                    "budget epsilon": (s["budget"]["epsilon"], m.epsilon),
                }
                assert s["reserved"]["open"] == m.open
                assert m.spent_epsilon + m.reserved_epsilon <= m.epsilon
                assert m.spent_delta <= m.delta
            else:
                pairs = {
                    "spent rho": (s["spent"]["rho"], m.rho),
                    "spent delta": (s["spent"]["delta"], m.zdelta),
                    "remaining rho": (s["remaining"]["rho"], m.rho_budget - m.rho),
                    "delta_approx": (s["delta_approx"], m.delta_approx),
                    "rho budget": (s["rho_budget"], m.rho_budget),
                }
                assert m.rho <= m.rho_budget
                assert m.zdelta <= m.delta_approx
            for what, (api, model) in pairs.items():
                assert frac(api) == model, f"{m.id} {what}: api {api} != model {model}"

    @invariant()
    def ledgers_replay(self) -> None:
        """Each changed dataset's new ledger entries, fed to its incremental replay: the chain
        holds and every recomputed state equals the stored one, up to the dataset's head."""
        for dataset in sorted(self.touched):
            replayer, seen = self.replayers.get(dataset) or (Replayer(), 0)
            r = self.client.get(
                f"/v1/datasets/{dataset}/ledger",
                params={"after_seq": seen, "limit": 100_000},
                headers=AUTH,
            )
            assert r.status_code == 200, r.text
            for entry in r.json()["entries"]:
                replayer.feed(entry)
                seen = entry["seq"]
            verdict = replayer.snapshot().verdict()
            assert verdict.ok, verdict.problems
            head = self.client.get(f"/v1/datasets/{dataset}", headers=AUTH).json()["ledger"]
            assert verdict.entries == seen == head["last_seq"]
            assert verdict.head_hash == head["head_hash"]
            self.replayers[dataset] = (replayer, seen)
        self.touched.clear()


@pytest.fixture
def machine(client: TestClient) -> type[ApiMachine]:
    ApiMachine.client = client
    return ApiMachine


def test_api_matches_the_reference_model(machine: type[ApiMachine]) -> None:
    run_state_machine_as_test(machine, settings=MACHINE_SETTINGS)


def forgetful_cancel(config: Any, state: Any, reservation: Any) -> Any:
    """A broken cancel: the reservation's δ is not returned."""
    blind = dc_replace(reservation, partition=dc_replace(reservation.partition, delta=ZERO))
    return ORIGINAL_CANCEL(config, state, blind)


ORIGINAL_CANCEL = invocation_service.accounting_cancel  # type: ignore[attr-defined]


@pytest.fixture
def broken_cancel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(invocation_service, "accounting_cancel", forgetful_cancel)
    yield


class ReservingMachine(ApiMachine):
    """The same rules and invariants, with every ``basic`` declaration a two-cell ODP
    reservation with δ > 0, so the broken path is reached in the first examples."""

    def mechanisms(self, mode: str) -> st.SearchStrategy[dict[str, Any]]:
        if mode != "basic":
            return super().mechanisms(mode)
        cells = [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.25"}]
        return st.just({"type": "odp", "cells": cells, "delta": "0.0001"})


@pytest.mark.usefixtures("broken_cancel")
def test_the_machine_catches_a_forgotten_refund(
    machine: type[ApiMachine], backend: Backend
) -> None:
    if backend.name != "sqlite":
        pytest.skip("the proof that the machine can fail needs one backend only")
    with pytest.raises(AssertionError, match=r"cancel refund|spent delta"):
        run_state_machine_as_test(
            ReservingMachine,
            # no shrinking: the first failure is the proof
            settings=settings(
                MACHINE_SETTINGS,
                max_examples=200,
                stateful_step_count=25,
                phases=[Phase.generate],
                derandomize=True,
            ),
        )
