"""The Lightning callback against a served app, with the real libraries (pytorch-lightning 2.6,
opacus 1.6, PyTorch's CPU wheel): a tiny ``LightningModule`` made private with Opacus in
``configure_optimizers`` is trained on synthetic Poisson batches with ``max_epochs`` above what
the budget admits; the callback registers each epoch before it runs and stops the trainer at the
first epoch the odometer refuses, before any batch of it: no noise drawn, parameters as the last
admitted epoch left them, the refusal's summary logged. A run resumed from Lightning's checkpoint
is not charged twice. Skipped where ``pytorch_lightning`` is not importable (the main venv):
``make test`` runs them in ``.venv-adapters``."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from odometer_client import OdometerClient
from tests.client.live import ADMIN_KEY, Server
from tests.support import ROOT

torch = pytest.importorskip("torch")
pytest.importorskip("opacus")
pl = pytest.importorskip("pytorch_lightning")
Callback: Any = pl.Callback

from odometer_client.adapters import lightning as adapter  # noqa: E402
from odometer_client.adapters import opacus as opacus_adapter  # noqa: E402

pytestmark = [
    # Opacus' per-sample gradient hooks on a first layer whose inputs need no gradient
    pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning"),
    # Lightning's advice for a real training (workers, logging intervals) on 8 tiny batches
    pytest.mark.filterwarnings("ignore::lightning_fabric.utilities.warnings.PossibleUserWarning"),
    # pytorch-lightning 2.6 builds torch.utils._pytree.LeafSpec, which PyTorch 2.13 deprecates
    pytest.mark.filterwarnings(
        "ignore:`isinstance.treespec, LeafSpec.` is deprecated:FutureWarning"
    ),
]


def _example() -> ModuleType:
    path = ROOT / "examples" / "opacus_lightning.py"
    spec = importlib.util.spec_from_file_location("examples_opacus_lightning", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = _example()


def _parameters(model: Any) -> list[Any]:
    return [p.detach().clone() for p in model.layer.parameters()]


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


class Snapshots(Callback):  # type: ignore[misc]
    """The model's parameters at the end of every epoch in which a batch ran."""

    def __init__(self) -> None:
        self.after: dict[int, list[Any]] = {}
        self.batches: dict[int, int] = {}

    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        epoch = int(trainer.current_epoch)
        self.batches[epoch] = self.batches.get(epoch, 0) + 1
        self.after[epoch] = _parameters(pl_module)


def test_the_trainer_stops_at_the_refused_epoch_before_any_step(
    client: OdometerClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # 8 steps an epoch at σ = 1.1, q = 1/8, each epoch charged ε 2.635 at δ 1e-5: a basic
    # dataset of (6, 1e-4) admits two epochs and refuses the third
    ds = client.create_dataset("lightning-stop", "6", "0.0001")
    model = EXAMPLE.TinyClassifier(seed=1)
    budget = adapter.EpochBudgetCallback(client, ds, run="stop", delta="0.00001")
    snapshots = Snapshots()
    draws = _noise_draws(monkeypatch)
    with caplog.at_level(logging.WARNING, logger=adapter.__name__):
        EXAMPLE.trainer([budget, snapshots], max_epochs=5).fit(model)

    assert budget.refused is not None and budget.refused.epoch == 2
    assert budget.refused.status_code == 409
    assert str(budget.refused).startswith("the odometer refused epoch 2, so none of its steps")
    summary = budget.refused.summary
    assert summary is not None and summary["text"] in str(budget.refused)
    assert f"training stopped before epoch 2: {budget.refused}" in caplog.text
    # the trainer stopped at that epoch: no batch of it (nor after it) ran
    assert snapshots.batches == {0: 8, 1: 8}
    assert budget.guard is not None and budget.guard.steps_taken == 16
    assert budget.guard.remaining == 0
    assert len(draws) == 32  # two parameter tensors (weight, bias) at each of the 16 steps
    assert sum(steps for _, _, steps in model.engine.accountant.history) == 16
    # the parameters are those the last admitted epoch left
    assert _same(_parameters(model), snapshots.after[1])
    accepted = _accepted(client, ds)
    assert [e.declaration for e in accepted] == [
        {
            "type": "dp_sgd",
            "noise_multiplier": "1.1",
            "sample_rate": "0.125",
            "steps": 8,
            "delta": "0.00001",
        }
    ] * 2
    assert sorted(budget.invocations) == [0, 1]
    kinds = [e.kind for e in client.ledger(ds)]
    assert kinds.count("invocation_rejected") == 1


@pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty:UserWarning")
@pytest.mark.parametrize(
    ("every_n_train_steps", "rerun"),
    [(None, {1: 8, 2: 8}), (3, {1: 4, 2: 8})],
    ids=["epoch-end checkpoint", "mid-epoch checkpoint"],
)
def test_a_run_resumed_from_lightning_checkpoint_is_not_charged_twice(
    client: OdometerClient, tmp_path: Path, every_n_train_steps: int | None, rerun: dict[int, int]
) -> None:
    """The process dies in epoch 1 after its sixth batch; it is resumed from the last checkpoint:
    the end of epoch 0 (Lightning calls ``on_train_epoch_start`` for epoch 1 again), or step 12
    (epoch 1's fourth batch: Lightning resumes in the middle of the epoch, and the callback
    registers it before its next batch). Epoch 1 gets the crashed run's invocation back."""
    ds = client.create_dataset(f"lightning-resume-{every_n_train_steps or 'epoch'}", "20", "0.0001")

    class Crash(Callback):  # type: ignore[misc]
        def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
            if trainer.current_epoch == 1 and args[-1] == 5:
                raise RuntimeError("the process died")

    def checkpoints() -> Any:
        return pl.callbacks.ModelCheckpoint(
            dirpath=tmp_path, save_last=True, every_n_train_steps=every_n_train_steps
        )

    budget = adapter.EpochBudgetCallback(client, ds, run="resume", delta="0.00001")
    first = EXAMPLE.trainer(
        [budget, checkpoints(), Crash()], max_epochs=3, enable_checkpointing=True
    )
    with pytest.raises(RuntimeError, match="the process died"):
        first.fit(EXAMPLE.TinyClassifier(seed=3))
    crashed = budget.invocations
    assert sorted(crashed) == [0, 1]
    spent = client.get_dataset(ds).status["spent"]["epsilon"]
    assert len(_accepted(client, ds)) == 2

    # a new process: a new module, the same run label, Lightning's last checkpoint
    resumed = adapter.EpochBudgetCallback(client, ds, run="resume", delta="0.00001")
    snapshots = Snapshots()
    again = EXAMPLE.trainer(
        [resumed, snapshots, checkpoints()], max_epochs=3, enable_checkpointing=True
    )
    again.fit(EXAMPLE.TinyClassifier(seed=4), ckpt_path=str(tmp_path / "last.ckpt"))
    assert resumed.refused is None
    assert snapshots.batches == rerun
    assert resumed.invocations[1].id == crashed[1].id  # the crashed run's invocation, again
    accepted = _accepted(client, ds)
    assert len(accepted) == 3  # epochs 0, 1 and 2: epoch 1 once
    per_epoch = Decimal(accepted[0].charge["epsilon"])
    assert client.get_dataset(ds).status["spent"]["epsilon"] == spent + per_epoch


def test_accumulated_batches_are_declared_from_the_trainer(client: OdometerClient) -> None:
    """Lightning's ``accumulate_grad_batches`` is the guard's accumulation: on Poisson batches
    (a record may be in two of them) the rate k·q does not hold, and the training is refused
    before its first step, nothing registered."""
    ds = client.create_dataset("lightning-accumulation", "10", "0.00001")
    budget = adapter.EpochBudgetCallback(client, ds, run="accumulate")
    with pytest.raises(ValueError, match="may share a record"):
        EXAMPLE.trainer([budget], max_epochs=1, accumulate_grad_batches=2).fit(
            EXAMPLE.TinyClassifier(seed=5)
        )
    assert _accepted(client, ds) == []


def test_the_callback_needs_a_dp_optimizer() -> None:
    with pytest.raises(TypeError, match="exactly one Opacus DPOptimizer"):
        adapter._dp_optimizer([torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1)])
    with pytest.raises(ValueError, match="name the run"):
        adapter.EpochBudgetCallback(None, "ds", run="")
    assert issubclass(adapter.EpochBudgetCallback, pl.Callback)
    assert isinstance(opacus_adapter.EpochGuard, type)


def test_the_example_runs(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    result = EXAMPLE.main(["--url", server.base_url, "--key", ADMIN_KEY])
    assert result["trained"] == 10  # the plan's ten epochs; the eleventh is refused
    assert result["refused"].startswith("the odometer refused epoch 10")
    assert result["steps"] == 80
    out = capsys.readouterr().out
    assert "10 epochs trained, 80 steps; stopped: the odometer refused epoch 10" in out
