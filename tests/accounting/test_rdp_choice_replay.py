"""A replay on another machine accepts the ``rdp`` ladder shape a first declaration chose where
float noise could tip the choice, and nothing else (``docs/accounting.md``, *rdp: the ladder
shaped by the first declaration*, *What replay checks*).

The rule (:func:`~odometer_core.accounting.modes.rdp_choice.choose`) judges the candidates by
two float criteria, and a first Gaussian can sit on the edge of either on an ``rdp`` dataset
of (8, 10⁻⁵) (found by bisection on σ between two σ choosing differently):

- at σ = :data:`REGRET_EDGE` the regret of candidate 0 (steps 4, down to 1/30) is the limit
  to within 10⁻¹⁵: this machine keeps it in and chooses it (its sum of logs is the smallest);
  a machine whose limit is 10⁻¹⁰ lower leaves it out and chooses candidate 4 (steps 5, 1/30);
- at σ = :data:`TIE_EDGE` candidate 12 (steps 7, 1/30) sums its logs below candidate 4's by
  the tie (10⁻⁹ relative) to within 10⁻¹⁵: this machine keeps the earlier one (4), a machine
  whose tie is a millionth narrower takes 12.

A ledger written there must replay here; a shape no such noise leads to must not."""

from __future__ import annotations

import copy
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import admit, initial_state, make_config, parse_declaration
from odometer_core.accounting.modes import first_ladder, rdp_choice, rdp_shaped
from odometer_core.accounting.odometer import LadderShape
from odometer_core.ledger import replay
from tests.support import AUTH, rehashed

BUDGET = ("8", "0.00001")
#: σ of the first Gaussian on the two edges
REGRET_EDGE = "2.068745380968236549729371424"
TIE_EDGE = "3.231875218972965832704875855"

#: what ``rdp.py`` passes to the rule: orders, level 1's thresholds, the curve, pool, target
Args = tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], float, Decimal]


def _args(sigma: str, budget: tuple[str, str] = BUDGET) -> Args:
    """What a new ``rdp`` dataset of ``budget`` passes to the rule (``rdp._ladder_choice``:
    the orders, level 1's thresholds under the weights the declaration chooses, its curve, the
    ladder's pool, the creation target) when it admits a first Gaussian of ``sigma``."""
    config = make_config(*budget, "add_remove", {"mode": "rdp"})
    declaration = parse_declaration({"type": "gaussian", "sigma": sigma, "sensitivity": 1})
    seen: list[Args] = []
    rule = rdp_choice.chosen

    def spy(*args: Any) -> LadderShape:
        seen.append(args)
        return rule(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rdp_choice, "chosen", spy)
        admit(config, initial_state(config), declaration)
    assert len(seen) == 1
    return seen[0]


def _index(sigma: str, budget: tuple[str, str] = BUDGET) -> int:
    return rdp_choice.candidates().index(rdp_choice.choose(*_args(sigma, budget)))


def _could(sigma: str, tolerance: float = first_ladder.FLOAT_TOLERANCE) -> set[int]:
    args = _args(sigma)
    return {
        i
        for i, shape in enumerate(rdp_choice.candidates())
        if rdp_choice.could_choose(shape, *args, tolerance=tolerance)
    }


@pytest.fixture(autouse=True)
def _cold() -> Any:
    """Every test chooses from a cold memo (a test that patches the rule leaves none)."""
    rdp_choice.choose.cache_clear()
    yield
    rdp_choice.choose.cache_clear()


def test_the_regret_edge_is_one_float_noise_can_tip(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _index(REGRET_EDGE) == 0
    monkeypatch.setattr(rdp_choice, "REGRET_TOLERANCE", rdp_choice.REGRET_TOLERANCE - 1e-10)
    rdp_choice.choose.cache_clear()
    assert _index(REGRET_EDGE) == 4
    monkeypatch.undo()
    rdp_choice.choose.cache_clear()
    assert _could(REGRET_EDGE) == {0, 4}
    assert _could(REGRET_EDGE, tolerance=0.0) == {0}  # without a tolerance, the choice only


def test_the_tie_edge_is_one_float_noise_can_tip(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _index(TIE_EDGE) == 4
    monkeypatch.setattr(rdp_choice, "TIE", rdp_choice.TIE * (1 - 1e-6))
    rdp_choice.choose.cache_clear()
    assert _index(TIE_EDGE) == 12
    monkeypatch.undo()
    rdp_choice.choose.cache_clear()
    assert _could(TIE_EDGE) == {4, 12}
    assert _could(TIE_EDGE, tolerance=0.0) == {4}


@pytest.mark.parametrize(
    ("budget", "sigma"),
    [(BUDGET, "1.12"), (BUDGET, "20"), (("1", "0.00001"), "60"), (("3", "0.0000001"), "20")],
)
def test_far_from_an_edge_only_the_choice_could_be_chosen(
    budget: tuple[str, str], sigma: str
) -> None:
    args = _args(sigma, budget)
    chosen = rdp_choice.choose(*args)
    for shape in rdp_choice.candidates():
        assert rdp_choice.could_choose(shape, *args) == (shape == chosen), shape
    assert not rdp_choice.could_choose(replace(chosen, span=chosen.span + 1), *args)


@pytest.mark.parametrize("budget", [BUDGET, ("1", "0.00001"), ("3", "0.0000001")])
def test_without_noise_the_pass_ends_at_the_rules_choice(budget: tuple[str, str]) -> None:
    """The check's pass over the candidates, every comparison taken both ways only where the
    noise could tip it, is the rule's own pass at a tolerance of 0 (one end, the choice) and
    ends at the choice among others at 10⁻⁹, over first Gaussians from σ 2 to 200."""
    for sigma in ("2", "2.9", "4.4", "7", "11", "17", "26", "40", "63", "100", "160", "200"):
        args = _args(sigma, budget)
        judged = rdp_choice._judgement(*args)
        if judged is None:  # not one repeat held: the constant shape, nothing judged
            assert rdp_choice.choose(*args) == rdp_shaped.DEFAULT_RDP_LADDER
            continue
        choice = rdp_choice.candidates().index(rdp_choice.choose(*args))
        assert rdp_choice._possible(*judged, 0.0) == {choice}, sigma
        assert choice in rdp_choice._possible(*judged, first_ladder.FLOAT_TOLERANCE), sigma


def _ledger(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """An rdp dataset's ledger written by a machine whose regret limit is 10⁻¹⁰ lower: the
    first Gaussian on the edge, then two others."""
    with monkeypatch.context() as there:
        there.setattr(rdp_choice, "REGRET_TOLERANCE", rdp_choice.REGRET_TOLERANCE - 1e-10)
        rdp_choice.choose.cache_clear()
        body = {
            "name": "edge",
            "budget": {"epsilon": BUDGET[0], "delta": BUDGET[1]},
            "accounting": {"mode": "rdp"},
        }
        ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
        for sigma in (REGRET_EDGE, "20", "20"):
            mechanism = {"type": "gaussian", "sigma": sigma, "sensitivity": "1"}
            r = client.post(
                f"/v1/datasets/{ds}/invocations", json={"mechanism": mechanism}, headers=AUTH
            )
            assert r.status_code == 201, r.text
        entries: list[dict[str, Any]] = client.get(
            f"/v1/datasets/{ds}/ledger", headers=AUTH
        ).json()["entries"]
    rdp_choice.choose.cache_clear()
    return entries


def _recorded(entries: list[dict[str, Any]]) -> set[int]:
    shapes = {rdp_choice.recorded_in(e)[0] for e in entries if rdp_choice.recorded_in(e)}
    return {rdp_choice.candidates().index(s) for s in shapes}


def _with_shape(entries: list[dict[str, Any]], shape: dict[str, Any]) -> list[dict[str, Any]]:
    altered = copy.deepcopy(entries)
    for entry in altered:
        if (entry.get("state") or {}).get("ladder"):
            entry["state"]["ladder"] = shape
    return rehashed(altered)


def test_a_shape_chosen_within_float_noise_replays(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other machine's ledger records candidate 4; here the rule recomputes 0, and the
    replay accepts 4 (a candidate the rule could choose within the tolerance), deciding every
    entry with it: the states match exactly. (Before the tolerance, this replay failed at the
    first admission's state, entry 2: recomputed steps 4, stored steps 5.)"""
    entries = _ledger(client, monkeypatch)
    assert _recorded(entries) == {4}
    assert _index(REGRET_EDGE) == 0
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]


def test_a_shape_the_rule_could_not_choose_is_a_mismatch(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same ledger recording a candidate no float noise leads to (steps 8, down to 1/300),
    or a shape outside the candidates (candidate 4 with one more level in its span), or
    candidate 4 where this machine's check admits no tolerance, does not replay."""
    entries = _ledger(client, monkeypatch)
    assert replay(entries).ok
    far = rdp_choice.candidates()[19].to_json()
    verdict = replay(_with_shape(entries, far))
    assert not verdict.ok and "state" in verdict.problems[0]
    outside = rdp_choice.candidates()[4].to_json()
    outside["span"] += 1
    assert not replay(_with_shape(entries, outside)).ok
    monkeypatch.setattr(first_ladder, "FLOAT_TOLERANCE", 0.0)
    assert not replay(entries).ok
