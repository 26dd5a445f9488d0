"""The worked examples in ``examples/`` run against a real server process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.client.live import ADMIN_KEY, Server
from tests.support import ROOT


def _example(name: str) -> ModuleType:
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(server: Server, name: str) -> tuple[ModuleType, dict[str, Any]]:
    module = _example(name)
    result: dict[str, Any] = module.main(["--url", server.base_url, "--key", ADMIN_KEY])
    return module, result


def test_dp_sgd_rdp(example_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    _, result = _run(example_server, "dp_sgd_rdp")
    assert result["steps"] == 10 * 235  # 10 epochs × ⌈60000 / 256⌉
    assert len(result["accepted"]) == 3 and result["rejected"] == 1
    assert float(result["epsilon_spent"]) == pytest.approx(
        result["dp_accounting_epsilon"], rel=1e-6
    )
    assert result["epsilon_spent"] < Decimal(2)
    assert "refused before training" in capsys.readouterr().out


def test_svt_odp_basic_saving(example_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    module, result = _run(example_server, "svt_odp_basic")
    worst = Decimal("0.4")
    cells = {f"tops={k}": Decimal("0.1") + Decimal("0.3") * k / 3 for k in range(4)}
    settled = [cells[c] for c in result["cells"]]
    assert result["settled_epsilons"] == settled
    assert result["spent_epsilon"] == sum(settled)
    assert result["worst_case_epsilon"] == worst * len(settled)
    assert result["saving"] == sum(worst - s for s in settled)
    assert result["saving"] > 0  # at least one run released fewer than c ⊤ answers
    assert result["cancelled"] == 1
    assert result["remaining_epsilon"] == Decimal(module.BUDGET_EPSILON) - sum(settled)
    assert "saving" in capsys.readouterr().out


def test_split_mixed(example_server: Server) -> None:
    _, result = _run(example_server, "split_mixed")
    assert result["training_status"] == "accepted"
    assert result["laplace_epsilon"] == Decimal("0.2")
    assert (result["svt_cell"], result["svt_epsilon"], result["svt_refund"]) == (
        "tops=1",
        Decimal("0.3"),
        Decimal("0.2"),
    )
    assert result["queries_spent"] == Decimal("0.5")
    assert result["queries_remaining"] == Decimal("0.5")
    assert result["refused"] is True
    assert Decimal(1) < result["training_epsilon"] < Decimal(3)


def test_organisation_cap(example_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    _, result = _run(example_server, "organisation_cap")
    # one zcdp dataset of (10, 1e-5) admits as many (352 under accounting 1.7.0-1.8.0, 353
    # before; 1.9.0: the first Gaussian shapes level 1 at 0.5 of δ_c)
    assert result["capacity"] == 340
    assert result["admitted"] == result["capacity"] and result["level"] == "organisation"
    assert "(the cap is used by" in result["refusal"]
    assert result["verified"] is True
    drawn = result["drawn_rho"]
    per_ward = [(result["admitted"] - k + 2) // 3 for k in range(3)]
    assert [drawn[f"ward-{m}"] for m in ("zcdp", "rdp", "gdp")] == [
        Decimal("0.005") * n for n in per_ward
    ]
    assert Decimal(result["reading"]["epsilon"]) <= 10
    assert "refused at the organisation level" in capsys.readouterr().out


def test_examples_run_as_scripts(example_server: Server) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "svt_odp_basic.py"),
            "--url",
            example_server.base_url,
            "--key",
            ADMIN_KEY,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "saving ε=" in proc.stdout


def _quick_start() -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    after = readme.split("<!-- quick-start", 1)[1]
    return after.split("```sh\n", 1)[1].split("\n```", 1)[0]


def test_readme_quick_start(example_server: Server) -> None:
    """The README's quick start, verbatim but for the server URL and the interpreter's bin/."""
    script = _quick_start()
    assert len(script.splitlines()) <= 9  # with `make run`: under ten lines
    bin_dir = Path(sys.executable).parent
    odometer = bin_dir / "odometer"
    script = script.replace("http://127.0.0.1:8000", example_server.base_url)
    script = script.replace(".venv/bin/python", sys.executable)
    script = script.replace(
        ".venv/bin/odometer", str(odometer) if odometer.exists() else f"{sys.executable} -m app.cli"
    )
    env = {
        **os.environ,
        "ODOMETER_ADMIN_KEY": ADMIN_KEY,
        "ODOMETER_URL": example_server.base_url,  # as a newcomer on another PORT sets it
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "{'epsilon': Decimal('0.3'), 'delta': Decimal('0')}" in proc.stdout
    assert "epsilon=0.2, delta=1E-7" in proc.stdout or "epsilon=0.2" in proc.stdout
    assert "replay verification: OK" in proc.stdout


def test_opendp_laplace_runs_only_what_is_admitted(example_server: Server) -> None:
    _, result = _run(example_server, "opendp_laplace")
    assert result["opendp_epsilon"] == pytest.approx(0.4)  # sensitivity 100 / scale 250
    assert result["declared_epsilon"] >= Decimal(result["opendp_epsilon"])
    assert len(result["released"]) == 2 and result["refused"] == 2  # a third ε = 0.4 exceeds 1
    assert result["spent_epsilon"] == 2 * result["declared_epsilon"]


def test_readme_opendp_example(example_server: Server) -> None:
    """The README's OpenDP snippet, verbatim, against a real server."""
    readme = (ROOT / "README.md").read_text("utf-8")
    after = readme.split("<!-- opendp-example", 1)[1]
    snippet = after.split("```python\n", 1)[1].split("\n```", 1)[0]
    env = {**os.environ, "ODOMETER_URL": example_server.base_url, "ODOMETER_API_KEY": ADMIN_KEY}
    proc = subprocess.run(
        [sys.executable, "-c", snippet],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("released ")
    float(proc.stdout.split()[1])  # the noisy value OpenDP released
