"""The client's declaration helpers are generated from the server's document (one per kind of
its ``Mechanism`` union, the kind's fields as parameters): committed as generated, every kind
has a public helper, and what a generated helper sends is what the server reads."""

from __future__ import annotations

import importlib.util
import inspect
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from odometer_client import _declared, contract
from odometer_client import declarations as d
from odometer_core.accounting import parse_declaration

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate", ROOT / "client/generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kinds() -> list[str]:
    return list(contract.schema(contract.MECHANISM)["discriminator"]["mapping"])


def test_committed_helpers_are_generated_from_the_committed_document() -> None:
    committed = (ROOT / "client/odometer_client/_declared.py").read_text("utf-8")
    assert committed == _generator().generated_declared()


@pytest.mark.parametrize("kind", _kinds())
def test_every_kind_has_a_helper_whose_parameters_are_its_fields(kind: str) -> None:
    assert callable(getattr(d, kind))
    schema = contract.schema(contract.MECHANISM)["discriminator"]["mapping"][kind]
    fields = contract.schema(schema.rsplit("/", 1)[-1])
    required = [n for n in fields["required"] if n != "type"]
    params = inspect.signature(getattr(_declared, kind)).parameters
    assert set(params) == set(fields["properties"]) - {"type"}
    assert [n for n, p in params.items() if p.default is inspect.Parameter.empty] == required


def test_generated_helpers_send_what_the_core_reads() -> None:
    cases: list[tuple[d.Mechanism, dict[str, Any]]] = [
        (d.rdp(["2", 3], ["0.1", 0.25]), {"orders": ["2", "3"], "values": ["0.1", "0.25"]}),
        (d.ptr("0.5", "1e-6", tests=2), {"epsilon": "0.5", "delta": "0.000001", "tests": 2}),
        (d.iterative("0.1", 0, [1, 5]), {"step_epsilon": "0.1", "stopping_points": [1, 5]}),
        (d.tested_release(1, "0.5"), {"epsilon_release": "1", "epsilon_bottom": "0.5"}),
        (d.mcdp("0.5", "0.1"), {"mu": "0.5", "tau": "0.1"}),
        (d.zcdp("0.1", delta="1e-7"), {"rho": "0.1", "delta": "1E-7"}),
    ]
    for mechanism, some in cases:
        sent = mechanism.to_json()
        assert some.items() <= sent.items(), sent
        parse_declaration(sent)
    assert d.gdp(Decimal("0.5")).to_json() == {"type": "gdp", "mu": "0.5"}
    assert d.report_noisy_max("gumbel", 2).to_json()["monotonic"] is False  # always said
    with pytest.raises(ValueError, match="report_noisy_max: noise is 'gumbel' or 'exponential'"):
        d.report_noisy_max("laplace", 2)
    with pytest.raises(ValueError, match="not decimal text"):
        d.gdp("1_0")
