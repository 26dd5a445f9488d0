"""The Opacus adapter's declarations, workload, sample-rate discovery and idempotency key,
without Opacus or PyTorch (the main venv has neither). The guard is tested with the real library
in ``tests/adapters/test_opacus.py``."""

from __future__ import annotations

import ast
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from odometer_client.adapters import opacus as adapter


def test_the_adapter_imports_only_the_standard_library_and_the_client() -> None:
    assert adapter.__file__ is not None
    tree = ast.parse(Path(adapter.__file__).read_text(encoding="utf-8"))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    assert roots - sys.stdlib_module_names == {"odometer_client"}


def test_an_epoch_is_a_dp_sgd_with_sigma_down_and_the_rate_up() -> None:
    # 1/3 and 1.1 are not binary floats: σ is read down, the rate up, to 17 digits
    declared = adapter.declaration(1.1, 1 / 3, 3).to_json()
    assert declared == {
        "type": "dp_sgd",
        "noise_multiplier": "1.1",
        "sample_rate": "0.33333333333333332",
        "steps": 3,
    }
    assert Fraction(Decimal("1.1")) <= Fraction(1.1)
    assert Fraction(Decimal("0.33333333333333332")) >= Fraction(1 / 3)
    # 0.7 as a float is below 7/10: read down it is 0.69999999999999995
    assert adapter.declaration(0.7, 0.125, 8).to_json()["noise_multiplier"] == (
        "0.69999999999999995"
    )
    # Opacus' rate 1/len(loader) for 7 batches, read up
    rate = Decimal(adapter.declaration(1.0, 1 / 7, 7).to_json()["sample_rate"])
    assert Fraction(rate) >= Fraction(1 / 7) > Fraction(rate) - Fraction(1, 10**17)


def test_a_delta_is_the_basic_conversion_delta() -> None:
    declared = adapter.declaration(1.0, 0.01, 100, delta="0.00001").to_json()
    assert declared["delta"] == "0.00001"


def test_accumulation_as_opacus_hook_records_it_and_the_split_bound() -> None:
    # Opacus' hook: sample_rate × accumulated_iterations per step
    assert adapter.declaration(1.0, 0.125, 4, accumulation=2).to_json() == {
        "type": "dp_sgd",
        "noise_multiplier": "1",
        "sample_rate": "0.25",
        "steps": 4,
    }
    # post-processing: k steps of σ/√k at rate q per optimizer step; √2 read up, σ/√2 down
    split = adapter.declaration(1.0, 0.125, 4, accumulation=2, accumulation_bound="split").to_json()
    assert split["steps"] == 8 and split["sample_rate"] == "0.125"
    sigma = Decimal(split["noise_multiplier"])
    # 1/√2 = 0.7071067811865475244…: read down (Decimal's own sqrt rounds half-even, and
    # 1/1.4142135623730950 = 0.70710678118654754… is above 1/√2)
    assert sigma == Decimal("0.70710678118654752")
    assert Fraction(sigma) ** 2 * 2 <= 1  # never more noise than Opacus adds
    split3 = adapter.declaration(1.1, 0.125, 1, accumulation=3, accumulation_bound="split")
    sigma3 = Fraction(Decimal(split3.to_json()["noise_multiplier"]))
    assert sigma3**2 * 3 <= Fraction(Decimal("1.1")) ** 2 < (sigma3 + Fraction(1, 10**16)) ** 2 * 3
    with pytest.raises(ValueError, match="above 1"):
        adapter.declaration(1.0, 0.5, 4, accumulation=3)
    with pytest.raises(ValueError, match="'opacus' or 'split'"):
        adapter.declaration(1.0, 0.5, 4, accumulation_bound="other")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("batches", "accumulation", "steps"), [(8, 1, 8), (8, 2, 4), (9, 2, 5), (1, 4, 1)]
)
def test_steps_per_epoch_round_a_last_short_group_up(
    batches: int, accumulation: int, steps: int
) -> None:
    assert adapter.steps_per_epoch(batches, accumulation) == steps


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0.0, 0.1, 1), "noise multiplier is 0.0"),
        ((float("nan"), 0.1, 1), "noise multiplier is nan"),
        ((1.0, 1.5, 1), "above 1"),
        ((1.0, 0.0, 1), "sample rate is 0.0"),
        ((1.0, 0.1, 0), "steps must be a positive integer"),
        ((True, 0.1, 1), "not a number"),
        ((1.0, "0.1", 1), "not a number"),
        ((Decimal(-1), 0.1, 1), "no finite guarantee"),
    ],
)
def test_what_cannot_be_declared_is_refused(args: tuple[Any, Any, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        adapter.declaration(*args)


def test_the_plan_is_an_rdp_workload() -> None:
    assert adapter.workload(1.1, 0.125, 8, 10) == [
        {
            "mechanism": {
                "type": "dp_sgd",
                "noise_multiplier": "1.1",
                "sample_rate": "0.125",
                "steps": 8,
            },
            "count": 10,
        }
    ]
    with pytest.raises(ValueError, match="epochs must be a positive integer"):
        adapter.workload(1.1, 0.125, 8, 0)


def test_the_key_is_the_dataset_the_run_and_the_epoch() -> None:
    key = adapter.idempotency_key("ds-1", "run", 3)
    assert key.startswith("opacus-") and len(key) == len("opacus-") + 64
    assert key == adapter.idempotency_key("ds-1", "run", 3)
    others = {
        adapter.idempotency_key("ds-2", "run", 3),
        adapter.idempotency_key("ds-1", "run 2", 3),
        adapter.idempotency_key("ds-1", "run", 4),
    }
    assert key not in others and len(others) == 3
    # epochs registered as one: the first epoch and how many (one epoch is the plain key)
    assert adapter.idempotency_key("ds-1", "run", 3, 1) == key
    block = adapter.idempotency_key("ds-1", "run", 3, 2)
    assert block != key and block not in others
    with pytest.raises(ValueError, match="count must be"):
        adapter.idempotency_key("ds-1", "run", 3, 0)
    with pytest.raises(ValueError, match="name the run"):
        adapter.idempotency_key("ds-1", "", 0)
    with pytest.raises(ValueError, match="epoch must be"):
        adapter.idempotency_key("ds-1", "run", -1)


def _hook_made_with(sample_rate: float) -> Any:
    """A hook made as Opacus' ``get_optimizer_hook_fn`` makes one: a closure over
    ``sample_rate``."""

    def hook_fn(optim: Any) -> None:
        del optim
        print(sample_rate)

    return hook_fn


class _Loader:
    def __init__(self, batches: int, sample_rate: float | None = None) -> None:
        self.batches = batches
        if sample_rate is not None:
            self.sample_rate = sample_rate

    def __len__(self) -> int:
        return self.batches


class _Optimizer:
    noise_multiplier = 1.1

    def __init__(self, hook: Any = None) -> None:
        self.step_hook = hook


def test_the_sample_rate_is_the_hook_s_then_the_loader_s_then_one_over_its_length() -> None:
    assert adapter.hook_sample_rate(_Optimizer(_hook_made_with(0.125))) == 0.125
    assert adapter.hook_sample_rate(_Optimizer()) is None
    assert adapter.hook_sample_rate(_Optimizer(print)) is None  # a builtin: no closure
    hooked = _Optimizer(_hook_made_with(0.125))
    assert adapter.training_sample_rate(hooked, _Loader(4, 0.5)) == 0.125
    assert adapter.training_sample_rate(_Optimizer(), _Loader(4, 0.5)) == 0.5
    assert adapter.training_sample_rate(_Optimizer(), _Loader(4)) == 0.25
    assert adapter.training_sample_rate(hooked, _Loader(4), 0.01) == 0.01
    assert adapter.training_workload(hooked, _Loader(8), 3) == adapter.workload(1.1, 0.125, 8, 3)
