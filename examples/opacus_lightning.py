"""A PyTorch Lightning training with Opacus that stops when the odometer refuses the next epoch.

A small classifier (a ``LightningModule`` made private with Opacus in ``configure_optimizers``,
as Opacus' own Lightning example does, on Poisson batches) is trained on synthetic data with
``max_epochs=100``. ``EpochBudgetCallback`` registers each epoch with the odometer before it
runs; the odometer's dataset, an ``rdp`` budget of (8, 10⁻⁵) whose workload is a ten-epoch plan,
admits ten epochs and refuses the eleventh, and the callback stops the trainer there, before any
batch of it runs.

Needs Opacus, PyTorch and PyTorch Lightning (``make adapters-env`` installs the CPU wheel):

    .venv-adapters/bin/python examples/opacus_lightning.py --url URL --key "$KEY"
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from opacus import PrivacyEngine
from opacus.data_loader import DPDataLoader
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odometer_client import OdometerClient
from odometer_client.adapters.lightning import EpochBudgetCallback
from odometer_client.adapters.opacus import workload

NOISE_MULTIPLIER = 1.1
BATCH_SIZE = 8  # expected batch size: the sample rate is 8/64 = 1/len(loader)
RECORDS = 64


class TinyClassifier(pl.LightningModule):
    """A linear classifier of 4 features on 64 synthetic records, made private with Opacus in
    ``configure_optimizers`` (σ = 1.1, clipping norm 1, Poisson batches of 8 expected: 8 steps
    an epoch)."""

    def __init__(self, seed: int = 0, noise_multiplier: float = NOISE_MULTIPLIER) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.features = torch.randn(RECORDS, 4, generator=generator)
        self.labels = (self.features.sum(dim=1) > 0).long()
        torch.manual_seed(seed)
        self.layer = nn.Linear(4, 2)
        self.noise_multiplier = noise_multiplier
        with warnings.catch_warnings():
            # Opacus' noise comes from PyTorch's generator, not a CSPRNG (secure_mode=True
            # needs torchcsprng): fine for an example, not for a release
            warnings.filterwarnings("ignore", message="Secure RNG turned off")
            self.engine = PrivacyEngine(accountant="rdp")

    def forward(self, features: Any) -> Any:
        return self.layer(features)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        features, labels = batch
        return nn.functional.cross_entropy(self(features), labels)

    def train_dataloader(self) -> Any:
        records = TensorDataset(self.features, self.labels)
        return DPDataLoader.from_data_loader(DataLoader(records, batch_size=BATCH_SIZE))

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.5)
        self.trainer.fit_loop.setup_data()
        loader = self.trainer.train_dataloader
        _, optimizer, _ = self.engine.make_private(
            module=self,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=self.noise_multiplier,
            max_grad_norm=1.0,
            poisson_sampling=isinstance(loader, DPDataLoader),
        )
        return optimizer


def trainer(callbacks: list[Any], max_epochs: int = 100, **options: Any) -> pl.Trainer:
    """A quiet CPU trainer: no logger, progress bar, summary or checkpoints unless given."""
    settings: dict[str, Any] = {
        "accelerator": "cpu",
        "devices": 1,
        "max_epochs": max_epochs,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
    }
    settings.update(options)
    return pl.Trainer(callbacks=callbacks, **settings)


def _client(argv: Sequence[str] | None) -> OdometerClient:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    args = parser.parse_args(argv)
    return OdometerClient(args.url, args.key)


def main(argv: Sequence[str] | None = None, epochs: int = 10) -> dict[str, Any]:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    with _client(argv) as client:
        # the plan: ten epochs of dp_sgd(σ = 1.1, q = 1/8, 8 steps), the dataset's workload
        plan = workload(NOISE_MULTIPLIER, 1 / 8, RECORDS // BATCH_SIZE, epochs)
        ds = client.create_dataset(
            "tiny classifier (Lightning)",
            "8",
            "0.00001",
            accounting={"mode": "rdp", "workload": plan},
        )
        model = TinyClassifier()
        budget = EpochBudgetCallback(client, ds, run="tiny classifier, Lightning run 1")
        trainer(callbacks=[budget], max_epochs=10 * epochs).fit(model)
        assert budget.guard is not None
        trained = len(budget.invocations)
        refused = "" if budget.refused is None else str(budget.refused)
        spent = client.get_dataset(ds).status["odometer"]
        print(f"{trained} epochs trained, {budget.guard.steps_taken} steps; stopped: {refused}")
        print(f"the odometer reads ε = {spent['epsilon']}")
        print(f"Opacus' own RDP accountant says ε = {model.engine.get_epsilon(1e-5):.3f}")
        return {
            "trained": trained,
            "refused": refused,
            "steps": budget.guard.steps_taken,
            "spent": spent,
        }


if __name__ == "__main__":
    main()
