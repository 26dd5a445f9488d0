"""``python -m benchmarks``: one entry point whose registry, make targets and smoke tests agree.

Every registered benchmark has a ``main(argv)``, a ``make bench-NAME`` target that calls the
entry point with ``BENCH_ARGS`` and says what it does in a ``## bench-NAME:`` comment, and a
smoke test in this directory that runs it by its module."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import BENCHMARKS, main

ROOT = Path(__file__).resolve().parents[2]


def test_alone_it_lists_every_benchmark_one_line_each() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert listed == list(BENCHMARKS)


def test_a_name_runs_that_benchmark_with_the_rest_of_the_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["ladder", "--quick", "--no-results"]) == 0
    assert "| gdp | (1, 1e-6) | 50 | 47 | -6.0 % |" in capsys.readouterr().out
    assert main(["no-such-benchmark"]) == 2
    assert "unknown benchmark 'no-such-benchmark'" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_each_benchmark_has_a_main_a_make_target_and_a_smoke_test(name: str) -> None:
    assert callable(BENCHMARKS[name].main())
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(rf"^## bench-{name}: .+\nbench-{name}: dev\n\t(.+)$", makefile, re.M)
    assert target is not None, f"no documented make target bench-{name}"
    assert target.group(1) == f"$(BIN)/python -m benchmarks {name} $(BENCH_ARGS)"
    phony = next(line for line in makefile.splitlines() if line.startswith(".PHONY:"))
    assert f" bench-{name} " in phony + " "
    module = f"benchmarks.{BENCHMARKS[name].module}"
    tests = [imported(p) for p in Path(__file__).parent.glob("test_*.py")]
    assert any(module in t for t in tests), f"no smoke test imports {module}"


def imported(path: Path) -> set[str]:
    """The modules a test file imports (``from benchmarks import quote, compare`` imports
    ``benchmarks.quote`` and ``benchmarks.compare``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_a_smoke_tests_imports_are_read_whatever_their_form(tmp_path: Path) -> None:
    test = tmp_path / "test_x.py"
    test.write_text("from benchmarks import quote, compare\nimport benchmarks.witness\n")
    assert {"benchmarks.quote", "benchmarks.compare", "benchmarks.witness"} <= imported(test)
