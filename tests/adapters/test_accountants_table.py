"""The table of docs/client.md, *Each library's own accountant beside the odometer's charge and
quote*, measured: every figure of its PipelineDP, Opacus (and Lightning) and Tumult rows is
computed here again — the library's own accountant, what the odometer charges for the
adapter's declarations, and the reading it quotes (``status.summary``) — and must be the one the
row shows (rounded as shown). The Tumult rows register the declarations the adapter makes for
those budgets (its mapping is tested against the real library in ``tests/adapters_tumult``).
Skipped where Opacus or PipelineDP is not importable (the main venv)."""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from types import ModuleType
from typing import Any

import pytest

from odometer_client import OdometerClient
from odometer_client.declarations import pure_dp, zcdp
from odometer_client.errors import BudgetExceeded
from odometer_client.shapes import EpsilonDelta
from tests.support import ROOT

pytest.importorskip("pipeline_dp")
accountants = pytest.importorskip("opacus.accountants")

from odometer_client.adapters import opacus as opacus_adapter  # noqa: E402
from odometer_client.adapters import tumult as tumult_adapter  # noqa: E402
from odometer_client.adapters.pipelinedp import PLDBudgetAccountant  # noqa: E402

HEADING = "### Each library's own accountant beside the odometer's charge and quote"


def _rows() -> list[str]:
    text = (ROOT / "docs" / "client.md").read_text("utf-8")
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ")]
    return [line for line in section.splitlines() if line.startswith("| ")][1:]  # no header


ROWS = _rows()


def _row(*fragments: str) -> str:
    (row,) = [r for r in ROWS if all(f in r for f in fragments)]
    return row


def _four(value: Any) -> str:
    return f"{float(value):.4f}"


def _quote(client: OdometerClient, ds: Any) -> EpsilonDelta[Decimal]:
    return client.get_dataset(ds).status["summary"]["guarantee"]


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"table_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _epsilons(sigma: float, rate: float, steps: int) -> tuple[float, float]:
    """Opacus' own PRV and RDP ε at δ = 10⁻⁵ for ``steps`` steps."""
    prv, rdp = accountants.PRVAccountant(), accountants.RDPAccountant()
    prv.history = rdp.history = [(sigma, rate, steps)]
    return prv.get_epsilon(1e-5), rdp.get_epsilon(1e-5)


def test_the_pipelinedp_row(client: OdometerClient) -> None:
    row = _row("PipelineDP", "PLDBudgetAccountant")
    ds = client.create_dataset("table-pipelinedp", "1", "0.000001")
    accountant = PLDBudgetAccountant(client, ds, 1, 1e-6, run="the table")
    released = _example("pipelinedp_regions").visits_per_region(accountant)
    accountant.compute_budgets()
    dict(released)
    assert f"ε {_four(accountant.charged_epsilon)}, δ 10⁻⁶" in row
    assert f"ε = {_four(_quote(client, ds)['epsilon'])}, δ = 10⁻⁶" in row


def test_the_opacus_rows(client: OdometerClient) -> None:
    # one job of 1,000 steps on basic (10, 1e-5), then on rdp (8, 1e-5) with it as the workload
    prv, rdp = _epsilons(1.0, 0.01, 1000)
    job = opacus_adapter.declaration(1.0, 0.01, 1000, delta="0.00001")
    row = _row("one job of 1,000 steps")
    ds = client.create_dataset("table-opacus-job", "10", "0.00001")
    charged = client.register(ds, job).charge["epsilon"]
    assert f"PRV ε {_four(prv)}, RDP ε {_four(rdp)}" in row
    assert f"ε {_four(charged)} ({float(charged) / prv:.3f}× PRV)" in row
    assert f"ε = {_four(_quote(client, ds)['epsilon'])}, δ = 10⁻⁵" in row

    row = _row("the same job; `rdp`")
    plan = opacus_adapter.workload(1.0, 0.01, 1000, 1)
    ds = client.create_dataset(
        "table-opacus-job-rdp", "8", "0.00001", accounting={"mode": "rdp", "workload": plan}
    )
    client.register(ds, opacus_adapter.declaration(1.0, 0.01, 1000))
    quote = _quote(client, ds)["epsilon"]
    assert f"RDP ε {_four(rdp)}" in row
    assert f"ε = {_four(quote)}, δ = 10⁻⁵ ({float(quote) / rdp:.2f}× RDP)" in row

    # two epochs of 8 steps, one by one, on basic (6, 1e-4); the third is refused
    prv, rdp = _epsilons(1.1, 0.125, 16)
    row = _row("two epochs of 8 steps")
    ds = client.create_dataset("table-opacus-epochs", "6", "0.0001")
    epoch = opacus_adapter.declaration(1.1, 0.125, 8, delta="0.00001")
    charges = [client.register(ds, epoch).charge for _ in range(2)]
    assert charges[0] == charges[1] and charges[0]["delta"] == Decimal("0.00001")
    assert f"PRV ε {_four(prv)}, RDP ε {_four(rdp)} at 10⁻⁵ (16 steps)" in row
    assert f"ε {_four(charges[0]['epsilon'])}, δ 10⁻⁵ each" in row
    assert f"ε = {_four(_quote(client, ds)['epsilon'])}, δ = 2·10⁻⁵" in row

    # the examples' ten epochs (the Opacus loop and the Lightning callback declare the same)
    prv, rdp = _epsilons(1.1, 0.125, 80)
    plan = opacus_adapter.workload(1.1, 0.125, 8, 10)
    ds = client.create_dataset(
        "table-opacus-plan", "8", "0.00001", accounting={"mode": "rdp", "workload": plan}
    )
    admitted = 0
    while admitted <= 10:
        try:
            client.register(ds, opacus_adapter.declaration(1.1, 0.125, 8))
        except BudgetExceeded:
            break
        admitted += 1
    assert admitted == 10
    quote = _quote(client, ds)["epsilon"]
    for library in ("| Opacus 1.6 |", "| PyTorch Lightning 2.6"):
        row = _row(library, "ten epochs of 8 steps")
        assert f"PRV ε {_four(prv)}, RDP ε {_four(rdp)} at 10⁻⁵ (80 steps)" in row
        assert f"ε = {quote}, δ = 10⁻⁵" in row


def test_the_tumult_rows(client: OdometerClient) -> None:
    # the adapter's declarations for PureDPBudget(0.5), PureDPBudget(0.25): reservations
    row = _row("`PureDPBudget(0.5)`, then `PureDPBudget(0.25)`")
    ds = client.create_dataset("table-tumult-pure", "1", "0.000001")
    for epsilon in ("0.5", "0.25"):
        reservation = tumult_adapter.reservation(pure_dp(epsilon))
        assert reservation is not None
        client.settle(ds, client.register(ds, reservation), tumult_adapter.CELLS[0])
    spent = client.get_dataset(ds).status["spent"]
    assert f"ε {spent['epsilon']}, δ {spent['delta']}" in row
    quote = _quote(client, ds)
    assert f"ε = {quote['epsilon']}, δ = {quote['delta']}" in row

    # ApproxDPBudget(0.5, 1e-7), then PureDPBudget(0.25)
    row = _row("`ApproxDPBudget(0.5, 1e-7)`")
    delta = tumult_adapter._up(1e-7, "δ")
    ds = client.create_dataset("table-tumult-approx", "1", "0.000001")
    for declared in (tumult_adapter.declaration(_Approx(0.5, 1e-7)), pure_dp("0.25")):
        reservation = tumult_adapter.reservation(declared)
        assert reservation is not None
        client.settle(ds, client.register(ds, reservation), tumult_adapter.CELLS[0])
    spent = client.get_dataset(ds).status["spent"]
    assert spent == {"epsilon": Decimal("0.75"), "delta": delta}
    assert f"ε 0.75, δ {_power(delta)} (read up)" in row
    assert _quote(client, ds) == {"epsilon": Decimal("0.75"), "delta": Decimal("1E-7")}
    assert "ε = 0.75, δ = 10⁻⁷" in row

    # RhoZCDPBudget(0.125), then RhoZCDPBudget(0.03), on zcdp (10, 1e-6) and on basic (10, 1e-6)
    rho = tumult_adapter._up(0.03, "ρ")
    row = _row("`RhoZCDPBudget(0.125)`")
    ds = client.create_dataset("table-tumult-zcdp", "10", "0.000001", accounting={"mode": "zcdp"})
    for value in ("0.125", rho):
        client.register(ds, zcdp(value))
    spent = client.get_dataset(ds).status["spent"]
    assert f"ρ {spent['rho']}" in row
    assert f"ε = {_quote(client, ds)['epsilon']}, δ = 10⁻⁶" in row

    row = _row("the same two; `basic` (10, 10⁻⁶)")
    ds = client.create_dataset("table-tumult-zcdp-basic", "10", "0.000001")
    for value in ("0.125", rho):
        client.register(ds, zcdp(value))
    spent = client.get_dataset(ds).status["spent"]
    assert f"ε {_eight(spent['epsilon'])}, δ 2·10⁻⁷" in row
    assert f"ε = {_quote(client, ds)['epsilon']}, δ = 2·10⁻⁷" in row


class _Approx:
    """Tumult's ``ApproxDPBudget`` as the adapter reads it (its class name and ``value``)."""

    def __init__(self, epsilon: float, delta: float) -> None:
        self.value = (epsilon, delta)


_Approx.__name__ = "ApproxDPBudget"


def _power(value: Decimal) -> str:
    """9.9999999999999996E-8 as the table writes it: 9.9999999999999996·10⁻⁸."""
    mantissa, exponent = f"{value:E}".split("E")
    digits = str(int(exponent)).replace("-", "⁻")
    superscript = digits.translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{mantissa}·10{superscript}"


def _eight(value: Decimal) -> str:
    """A charge as the table writes it: 8 significant digits, rounded down."""
    exponent = value.adjusted() - 7
    return str(value.quantize(Decimal(1).scaleb(exponent), rounding="ROUND_FLOOR"))
