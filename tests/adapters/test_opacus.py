"""The Opacus guard against a served app, with the real library (opacus 1.6, PyTorch's CPU
wheel): a tiny classifier on synthetic data is trained epoch by epoch, each epoch registered
before it runs, until the budget refuses one; a step nothing reserved is refused before its
noise is drawn and the parameters stay as the last reserved step left them; a run resumed from
a checkpoint is not charged twice; gradient accumulation is declared at the rate Opacus' own
accountant hook records. Then, counted by the accountants without training: the plan declared
as an ``rdp`` workload admits ≥ 0.98× the steps of the RDP reference, and a ``basic`` dataset
charges one job within 3 % of Opacus' PRV accountant. Skipped where ``opacus`` is not
importable (the main venv): ``make test`` runs them in ``.venv-adapters``."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from decimal import Decimal
from types import ModuleType
from typing import Any

import pytest

from odometer_client import OdometerClient
from odometer_client.errors import BudgetExceeded
from tests.client.live import ADMIN_KEY, Server
from tests.support import ROOT

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

import dp_accounting  # noqa: E402

accountants = pytest.importorskip("opacus.accountants")

from odometer_client.adapters import opacus as adapter  # noqa: E402

#: PyTorch warns that Opacus' per-sample gradient hooks fire on a first layer whose inputs need
#: no gradient (a linear model on the data): expected, and said on every backward pass
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")


def _example() -> ModuleType:
    path = ROOT / "examples" / "opacus_training.py"
    spec = importlib.util.spec_from_file_location("examples_opacus_training", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = _example()


def _parameters(model: Any) -> list[Any]:
    return [p.detach().clone() for p in model.parameters()]


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(bool(torch.equal(x, y)) for x, y in zip(a, b, strict=True))


def _accepted(client: OdometerClient, ds: Any) -> list[Any]:
    return [e for e in client.ledger(ds) if e.kind == "invocation_accepted"]


def _noise_draws(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every noise draw of Opacus' optimizers (its module's ``_generate_noise``)."""
    draws: list[int] = []
    module = importlib.import_module("opacus.optimizers.optimizer")
    real = module._generate_noise

    def counted(*args: Any, **kwargs: Any) -> Any:
        draws.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "_generate_noise", counted)
    return draws


def _opacus_steps(engine: Any) -> int:
    return sum(steps for _, _, steps in engine.accountant.history)


def test_training_stops_at_the_refused_epoch_and_no_unreserved_step_runs(
    client: OdometerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, model, optimizer, loader = EXAMPLE.private_training(seed=1)
    # 8 steps an epoch at σ = 1.1, q = 1/8, each charged ε 2.635 at δ 1e-5 (basic composition
    # across invocations): a basic dataset of (6, 1e-4) admits two epochs
    ds = client.create_dataset("opacus-stop", "6", "0.0001")
    guard = adapter.EpochGuard(client, ds, optimizer, loader, run="stop", delta="0.00001")
    assert guard.sample_rate == 0.125 == adapter.hook_sample_rate(optimizer)
    assert guard.steps_per_epoch == 8 == len(loader)
    draws = _noise_draws(monkeypatch)
    trained = 0
    with pytest.raises(adapter.EpochRefused) as refused:
        for epoch in range(10):
            guard.reserve_epoch(epoch)
            EXAMPLE.run_epoch(model, optimizer, loader)
            trained += 1
    assert trained == 2
    assert refused.value.epoch == 2
    assert refused.value.status_code == 409
    assert "refused epoch 2" in str(refused.value)
    assert guard.steps_taken == 16 == _opacus_steps(engine)
    # two parameter tensors (weight, bias) drew noise at each of the 16 steps
    assert len(draws) == 32
    assert guard.remaining == 0
    accepted = _accepted(client, ds)
    assert len(accepted) == 2
    assert [e.declaration["steps"] for e in accepted] == [8, 8]
    assert {e.declaration["sample_rate"] for e in accepted} == {"0.125"}
    assert {e.declaration["noise_multiplier"] for e in accepted} == {"1.1"}

    # a loop that ignores the refusal: every step is refused before its noise is drawn, and
    # the parameters stay as the last reserved step left them
    last = _parameters(model)
    features, labels = next(iter(loader))
    while len(features) == 0:  # a Poisson batch may be empty
        features, labels = next(iter(loader))
    torch.nn.CrossEntropyLoss()(model(features), labels).backward()
    with pytest.raises(adapter.StepRefused, match="no step is reserved"):
        optimizer.step()
    assert _same(_parameters(model), last)
    assert len(draws) == 32
    assert all(p.grad is None and p.summed_grad is None for p in optimizer.params)
    assert _opacus_steps(engine) == 16  # Opacus' accountant saw no step either
    with pytest.raises(adapter.StepRefused):
        EXAMPLE.run_epoch(model, optimizer, loader)
    assert _same(_parameters(model), last)
    assert len(_accepted(client, ds)) == 2


def test_a_guard_refuses_steps_before_any_epoch_and_less_noise_than_reserved(
    client: OdometerClient,
) -> None:
    _, model, optimizer, loader = EXAMPLE.private_training(seed=2)
    ds = client.create_dataset("opacus-noise", "10", "0.00001")
    guard = adapter.EpochGuard(client, ds, optimizer, loader, run="noise")
    before = _parameters(model)
    with pytest.raises(adapter.StepRefused, match="no step is reserved"):
        EXAMPLE.run_epoch(model, optimizer, loader)
    assert _same(_parameters(model), before)
    guard.reserve_epoch(0)
    optimizer.noise_multiplier = 0.5  # less noise than the epoch was registered with
    with pytest.raises(adapter.StepRefused, match=r"below the 1\.1 reserved"):
        EXAMPLE.run_epoch(model, optimizer, loader)
    assert _same(_parameters(model), before)
    optimizer.noise_multiplier = 1.1
    EXAMPLE.run_epoch(model, optimizer, loader)
    assert not _same(_parameters(model), before)
    assert guard.steps_taken == 8


def test_a_resumed_run_is_not_charged_twice(client: OdometerClient, tmp_path: Any) -> None:
    ds = client.create_dataset("opacus-resume", "10", "0.00001")
    _, model, optimizer, loader = EXAMPLE.private_training(seed=3)
    guard = adapter.EpochGuard(client, ds, optimizer, loader, run="resume")
    first = guard.reserve_epoch(0)
    EXAMPLE.run_epoch(model, optimizer, loader)
    checkpoint = tmp_path / "checkpoint.pt"
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 1}, checkpoint
    )
    crashed = guard.reserve_epoch(1)
    features, labels = next(iter(loader))
    torch.nn.CrossEntropyLoss()(model(features), labels).backward()
    optimizer.step()  # one step of epoch 1, then the process dies
    spent = client.get_dataset(ds).status["spent"]["epsilon"]
    assert len(_accepted(client, ds)) == 2

    # a new process: the same run label, the checkpoint's state, epoch 1 registered again
    _, model, optimizer, loader = EXAMPLE.private_training(seed=4)
    state = torch.load(checkpoint)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    resumed = adapter.EpochGuard(client, ds, optimizer, loader, run="resume")
    again = resumed.reserve_epoch(state["epoch"])
    assert again.id == crashed.id != first.id
    assert client.get_dataset(ds).status["spent"]["epsilon"] == spent
    assert len(_accepted(client, ds)) == 2
    EXAMPLE.run_epoch(model, optimizer, loader)
    assert resumed.steps_taken == 8
    resumed.reserve_epoch(2)  # the next epoch is a new charge
    assert len(_accepted(client, ds)) == 3
    assert client.get_dataset(ds).status["spent"]["epsilon"] > spent


def test_epochs_reserved_as_one_fit_where_one_by_one_they_do_not(
    client: OdometerClient,
) -> None:
    # the issue's case: Opacus' 16 steps (σ = 1.1, q = 1/8) on an rdp dataset of (4, 1e-5)
    engine, model, optimizer, loader = EXAMPLE.private_training(seed=8)
    plan = adapter.training_workload(optimizer, loader, 2)
    one_by_one = client.create_dataset(
        "opacus-epochs", "4", "0.00001", accounting={"mode": "rdp", "workload": plan}
    )
    guard = adapter.EpochGuard(client, one_by_one, optimizer, loader, run="one by one")
    guard.reserve_epoch(0)
    with pytest.raises(adapter.EpochRefused):
        guard.reserve_epoch(1)

    together = client.create_dataset(
        "opacus-block", "4", "0.00001", accounting={"mode": "rdp", "workload": plan}
    )
    guard = adapter.EpochGuard(client, together, optimizer, loader, run="as one")
    block = guard.reserve_epochs(0, 2)
    assert guard.reserve_epochs(0, 2).id == block.id and guard.remaining == 16
    with pytest.raises(ValueError, match="overlap"):
        guard.reserve_epoch(1)
    for _ in range(2):
        EXAMPLE.run_epoch(model, optimizer, loader)
    assert guard.steps_taken == 16 == _opacus_steps(engine)
    (entry,) = _accepted(client, together)
    assert entry.declaration["steps"] == 16
    # a resumed run registering the same block gets the same invocation
    resumed = adapter.EpochGuard(client, together, optimizer, loader, run="as one")
    assert resumed.reserve_epochs(0, 2).id == block.id
    assert len(_accepted(client, together)) == 1


def test_batch_memory_manager_steps_are_declared_as_opacus_hook_records(
    client: OdometerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = importlib.import_module("opacus.utils.batch_memory_manager")
    engine, model, optimizer, loader = EXAMPLE.private_training(seed=5)
    ds = client.create_dataset("opacus-memory-manager", "10", "0.00001")
    guard = adapter.EpochGuard(client, ds, optimizer, loader, run="virtual steps")
    guard.reserve_epoch(0)
    draws = _noise_draws(monkeypatch)
    # Poisson batches of about 8 split into physical batches of 2: the skipped (virtual) steps
    # draw no noise and use no reservation; each logical step is one step at rate 1/8
    with memory.BatchMemoryManager(
        data_loader=loader, max_physical_batch_size=2, optimizer=optimizer
    ) as physical:
        EXAMPLE.run_epoch(model, optimizer, physical)
    assert engine.accountant.history == [(1.1, 0.125, 8)]
    (entry,) = _accepted(client, ds)
    assert entry.declaration == {
        "type": "dp_sgd",
        "noise_multiplier": "1.1",
        "sample_rate": "0.125",
        "steps": 8,
    }
    assert guard.steps_taken == 8 and guard.remaining == 0
    assert len(draws) == 16  # two parameter tensors at each of the 8 logical steps


def test_accumulation_is_declared_at_the_rate_opacus_hook_records(client: OdometerClient) -> None:
    engine, model, optimizer, loader = EXAMPLE.private_training(seed=6, poisson=False)
    ds = client.create_dataset("opacus-accumulation", "10", "0.00001")
    with pytest.raises(ValueError, match="assume_poisson=True"):
        adapter.EpochGuard(client, ds, optimizer, loader, run="shuffled", accumulation=2)
    guard = adapter.EpochGuard(
        client, ds, optimizer, loader, run="shuffled", accumulation=2, assume_poisson=True
    )
    assert guard.sample_rate == 0.125 == adapter.hook_sample_rate(optimizer)
    guard.reserve_epoch(0)
    EXAMPLE.run_epoch(model, optimizer, loader, accumulation=2)
    # Opacus' accountant recorded 4 steps of rate 2 × 1/8; the epoch was declared the same
    assert engine.accountant.history == [(1.1, 0.25, 4)]
    (entry,) = _accepted(client, ds)
    assert entry.declaration == {
        "type": "dp_sgd",
        "noise_multiplier": "1.1",
        "sample_rate": "0.25",
        "steps": 4,
    }
    assert guard.steps_taken == 4 and guard.remaining == 0

    # a guard declared for one batch a step refuses a step over two
    _, model, optimizer, loader = EXAMPLE.private_training(seed=7, poisson=False)
    single = adapter.EpochGuard(
        client, ds, optimizer, loader, run="one batch a step", assume_poisson=True
    )
    single.reserve_epoch(0)
    before = _parameters(model)
    with pytest.raises(adapter.StepRefused, match="2 batches accumulated"):
        EXAMPLE.run_epoch(model, optimizer, loader, accumulation=2)
    assert _same(_parameters(model), before)


def _largest(fits: Callable[[int], bool], start: int = 1) -> int:
    """The largest n ≥ 0 with ``fits(n)``, for ``fits`` true up to some n and false above."""
    low, high = 0, start
    while fits(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low


SIGMA, RATE, EPOCH_STEPS, TARGET = 1.0, 0.01, 100, ("8", "0.00001")


def test_the_plan_as_workload_admits_the_steps_rdp_allows(client: OdometerClient) -> None:
    epsilon, delta = float(TARGET[0]), float(TARGET[1])

    def opacus_rdp(steps: int) -> bool:
        accountant = accountants.RDPAccountant()
        accountant.history = [(SIGMA, RATE, steps)]
        return bool(accountant.get_epsilon(delta) <= epsilon)

    plan = adapter.workload(SIGMA, RATE, EPOCH_STEPS, 150)
    ds = client.create_dataset("opacus-plan", *TARGET, accounting={"mode": "rdp", "workload": plan})
    orders = [float(a) for a in ds.config["orders"]]

    def dp_accounting_rdp(steps: int) -> bool:
        event = dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(RATE, dp_accounting.GaussianDpEvent(SIGMA)),
            steps,
        )
        accountant = dp_accounting.rdp.RdpAccountant(orders)
        accountant.compose(event)
        return bool(accountant.get_epsilon(delta) <= epsilon)

    opacus_steps = _largest(opacus_rdp, 8192)
    reference = _largest(dp_accounting_rdp, 8192)
    assert (opacus_steps, reference) == (13623, 13613)

    # what the dataset admits: epochs until one is refused (as the guard registers them), then
    # chunks of 10 steps and single steps
    admitted = 0
    for chunk in (EPOCH_STEPS, 10, 1):
        while True:
            try:
                client.register(ds, adapter.declaration(SIGMA, RATE, chunk))
            except BudgetExceeded:
                break
            admitted += chunk
    assert admitted >= 0.98 * reference
    # measured: 13396 steps, 0.984× dp_accounting's RDP and 0.983× Opacus' RDP


def test_a_basic_dataset_charges_one_job_within_3_percent_of_opacus_prv(
    client: OdometerClient,
) -> None:
    accountant = accountants.PRVAccountant()
    accountant.history = [(SIGMA, RATE, 1000)]
    prv = accountant.get_epsilon(1e-5)
    ds = client.create_dataset("opacus-prv", "10", "0.00001")
    invocation = client.register(ds, adapter.declaration(SIGMA, RATE, 1000, delta="0.00001"))
    charged = invocation.charge["epsilon"]
    assert invocation.charge["delta"] == Decimal("0.00001")
    assert abs(float(charged) / prv - 1) <= 0.03
    # measured: 1.8289 where Opacus' PRV says 1.8384 (0.995×)


def test_the_example_runs(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    result = _example().main(["--url", server.base_url, "--key", ADMIN_KEY])
    assert result["trained"] == 10  # the plan's ten epochs; the eleventh is refused
    assert result["refused"].startswith("the odometer refused epoch 10")
    assert result["steps"] == 80
    out = capsys.readouterr().out
    assert "stopped before epoch 10" in out and "Opacus' own RDP accountant" in out
