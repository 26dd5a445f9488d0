"""An Opacus training whose epochs are drawn from the odometer before each one runs.

A small classifier is trained with DP-SGD (Opacus, Poisson sampling) on synthetic data. Each
epoch is registered with the odometer as one ``dp_sgd`` declaration before it runs; the
training stops at the first epoch the odometer refuses, and the guard on the optimizer refuses
any step nothing reserved before its noise is drawn. The training plan is the dataset's
workload, so its ``rdp`` orders are chosen for this run.

Needs Opacus and PyTorch (``make adapters-env`` installs the CPU wheel):

    .venv-adapters/bin/python examples/opacus_training.py --url URL --key "$KEY"
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odometer_client import OdometerClient
from odometer_client.adapters.opacus import EpochGuard, EpochRefused, training_workload

NOISE_MULTIPLIER = 1.1
BATCH_SIZE = 8  # expected batch size: the sample rate is 8/64 = 1/len(loader)
RECORDS = 64


def _client(argv: Sequence[str] | None) -> OdometerClient:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default $ODOMETER_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="API key (default $ODOMETER_API_KEY)")
    args = parser.parse_args(argv)
    return OdometerClient(args.url, args.key)


def private_training(
    seed: int = 0, accountant: str = "rdp", poisson: bool = True
) -> tuple[Any, Any, Any, Any]:
    """(privacy engine, model, DPOptimizer, data loader: Poisson unless ``poisson=False``) of a
    linear classifier of 4 features on 64 synthetic records, σ = 1.1, clipping norm 1, 8
    batches an epoch."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(RECORDS, 4, generator=generator)
    labels = (features.sum(dim=1) > 0).long()
    torch.manual_seed(seed)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = DataLoader(TensorDataset(features, labels), batch_size=BATCH_SIZE)
    with warnings.catch_warnings():
        # Opacus warns that its noise comes from PyTorch's generator, not a CSPRNG
        # (secure_mode=True needs torchcsprng): fine for an example, not for a release
        warnings.filterwarnings("ignore", message="Secure RNG turned off")
        engine = PrivacyEngine(accountant=accountant)
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=NOISE_MULTIPLIER,
            max_grad_norm=1.0,
            poisson_sampling=poisson,
        )
    return engine, model, optimizer, loader


def run_epoch(model: Any, optimizer: Any, loader: Any, accumulation: int = 1) -> int:
    """One epoch; ``accumulation`` batches per optimizer step. Returns the batches seen."""
    loss_of = nn.CrossEntropyLoss()
    seen = 0
    for features, labels in loader:
        loss_of(model(features), labels).backward()
        seen += 1
        if seen % accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()
    return seen


def main(argv: Sequence[str] | None = None, epochs: int = 10) -> dict[str, Any]:
    engine, model, optimizer, loader = private_training()
    with _client(argv) as client:
        # the plan: ten epochs of dp_sgd(σ = 1.1, q = 0.125, 8 steps), the dataset's workload
        plan = training_workload(optimizer, loader, epochs)
        ds = client.create_dataset(
            "tiny classifier", "8", "0.00001", accounting={"mode": "rdp", "workload": plan}
        )
        guard = EpochGuard(client, ds, optimizer, loader, run="tiny classifier, run 1")
        trained = 0
        refused = ""
        for epoch in range(10 * epochs):  # until the odometer refuses an epoch
            try:
                guard.reserve_epoch(epoch)  # registered before any step of the epoch
            except EpochRefused as exc:
                refused = str(exc)
                print(f"stopped before epoch {epoch}: {refused}")
                break
            run_epoch(model, optimizer, loader)
            trained += 1
            print(f"epoch {epoch}: {guard.steps_taken} steps so far")
        status = client.get_dataset(ds).status
        spent = status["odometer"]
        print(f"{trained} epochs trained; the odometer reads ε = {spent['epsilon']}")
        print(f"Opacus' own RDP accountant says ε = {engine.get_epsilon(1e-5):.3f}")
        return {"trained": trained, "refused": refused, "steps": guard.steps_taken, "spent": spent}


if __name__ == "__main__":
    main()
