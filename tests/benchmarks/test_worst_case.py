"""The worst-case benchmark's harness: it measures a decision, it kills one at the cap, and it
lays out the before/after table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.worst_case import CASES, ROOT, Case, main, render, run_case

PURE = Case("pure ε", "basic", {"type": "pure_dp", "epsilon": "0.1"})


def test_a_cheap_decision_is_measured() -> None:
    cpu, outcome = run_case(PURE, 30)
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


def test_another_checkout_is_measured_with_its_own_accounting(tmp_path: Path) -> None:
    """``--before DIR``: the decision is made by DIR's core, not by the copy installed in the
    environment (which once silently measured this checkout in both columns)."""
    shutil.copytree(ROOT / "core" / "odometer_core", tmp_path / "core" / "odometer_core")
    marked = tmp_path / "core" / "odometer_core" / "accounting" / "__init__.py"
    marked.write_text(
        marked.read_text()
        + "\n\nclass _Marked:\n    outcome = 'decided by the other checkout'\n\n\n"
        "def admit(*_: object) -> _Marked:\n    return _Marked()\n"
    )
    assert run_case(PURE, 30, tmp_path)[1] == "decided by the other checkout"


def test_a_copy_from_outside_the_checkout_is_refused(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "odometer_core").symlink_to(ROOT / "core" / "odometer_core")
    cpu, outcome = run_case(PURE, 30, tmp_path)
    assert cpu is None
    assert outcome.startswith("crashed: odometer_core.accounting was imported from ")


def test_one_case_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    """``--case``: only the matching cases, printed as the section's table."""
    assert main(["--case", "gdp μ=10^6", "--cap", "30", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "| gdp μ=10^6 | gdp | 0.00 (rejected) |" in out
    assert out.count("| svt") == 0 and "Slowest decision now: 0.00 s of CPU" in out
