"""The worst-case benchmark's harness: it measures a decision, it kills one at the cap, and it
lays out the before/after table."""

from __future__ import annotations

from benchmarks.worst_case import CASES, ROOT, Case, render, run_case


def test_a_cheap_decision_is_measured() -> None:
    cpu, outcome = run_case(Case("pure ε", "basic", {"type": "pure_dp", "epsilon": "0.1"}), 30)
    assert cpu is not None and 0 <= cpu < 30
    assert outcome == "accepted"


def test_a_declaration_refused_as_a_request_is_reported_as_a_422() -> None:
    case = Case("poisson under replace-one", "basic", CASES[0].mechanism, relation="replace_one")
    cpu, outcome = run_case(case, 30)
    assert cpu is not None
    assert outcome == "422 DeclarationError"


def test_a_decision_past_the_cap_is_killed_and_reported() -> None:
    slow = next(c for c in CASES if c.name == "subsampled Gaussian q=1-1e-6 σ=1e-3")
    cpu, outcome = run_case(slow, 0.01)  # not even the imports finish in 10 ms
    assert (cpu, outcome) == (None, "killed")
    table = render([(slow, (0.12, "rejected"), (cpu, outcome))], 0.01, str(ROOT))
    assert (
        "| subsampled Gaussian q=1-1e-6 σ=1e-3 | basic | > 0.01 (killed) | 0.12 (rejected) |"
        in (table)
    )
    assert "Slowest decision now: 0.12 s of CPU" in table
