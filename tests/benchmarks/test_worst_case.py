"""The worst-case benchmark's harness: it measures a decision, and it kills one at the cap."""

from __future__ import annotations

from benchmarks.worst_case import CASES, Case, render, run_case


def test_a_cheap_decision_is_measured() -> None:
    cpu, outcome = run_case(Case("pure ε", "basic", {"type": "pure_dp", "epsilon": "0.1"}), 30)
    assert cpu is not None and 0 <= cpu < 30
    assert outcome == "accepted"


def test_a_decision_past_the_cap_is_killed_and_reported() -> None:
    slow = next(c for c in CASES if c.mode == "basic" and "q=1-1e-6" in c.name)
    cpu, outcome = run_case(slow, 0.5)
    assert (cpu, outcome) == (None, "killed")
    table = render([(slow, cpu, outcome)], 0.5)
    assert "| subsampled Gaussian q=1-1e-6 σ=1e-3 | basic | > 0.5 (killed) | killed |" in table
