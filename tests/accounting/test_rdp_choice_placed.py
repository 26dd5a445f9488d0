""":func:`odometer_core.accounting.modes.rdp_choice._placed`, the levels a shaped ladder places
for a first declaration computed for all levels at once, is the same floats as the
one-level-at-a-time path it replaced in :func:`~odometer_core.accounting.modes.rdp_choice.
choose` (:func:`~odometer_core.accounting.odometer.anchored_value` per level, then
:func:`~odometer_core.accounting.modes.rdp_shaped.whole_levels`): every candidate shape, pools
of the ledgers' kinds, multiples from 1 to 2^52 (seeded), each compared with ``==``."""

from __future__ import annotations

import random

import pytest

from odometer_core.accounting import odometer as odo
from odometer_core.accounting.modes import rdp_choice as rc
from odometer_core.accounting.modes import rdp_shaped as shaped
from odometer_core.accounting.odometer import LadderShape

POOLS = (1e-6, 9.999999999999999e-06, 9.899999999999998e-07, 9e-6, 0.05, 3.3e-8)


def _one_at_a_time(n: float, pool: float, shape: LadderShape) -> list[tuple[float, float]]:
    levels, parts = shaped.level_shares(pool, shape)
    values = [odo.anchored_value(n, k, shape) for k in levels]
    levels, parts, values = shaped.whole_levels(levels, parts, values, pool, shape)
    return [(v, s) for k, s, v in zip(levels, parts, values, strict=True) if k > 1]


@pytest.mark.parametrize("pool", POOLS)
def test_placed_is_the_one_level_path(pool: float) -> None:
    rng = random.Random(49)
    multiples = [1.0, 2.0, 3.0000001, 4.7, 68.4, 1e6, 2.0**52]
    multiples += [10 ** rng.uniform(0, 9) for _ in range(60)]
    for shape in rc.candidates():
        for n in multiples:
            values, shares = rc._placed(n, pool, shape)
            expected = _one_at_a_time(n, pool, shape)
            assert list(zip(values.tolist(), shares.tolist(), strict=True)) == expected
