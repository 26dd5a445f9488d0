"""The Poisson-subsampled Gaussian PLDs of :mod:`odometer_core.accounting.pld` reuse one step's
PMF and its Chernoff moments across step counts (an instead search tries many counts of one
step): every composed PMF and every ε stays bit for bit what dp_accounting 0.6 computes
(``DensePLDPmf.self_compose``, ``PLDAccountant``), so no charge or reading moves."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from odometer_core.accounting import pld

CASES = [
    (1.12, 0.0042666666666666667, 14100),  # the MNIST tutorial's job
    (1.1, 0.01, 10000),
    (0.8, 0.05, 300),
    (2.0, 0.3, 7),
    (1.0, 0.5, 1),
    (5.0, 0.001, 100000),
    (0.6, 0.02, 2000),
]


@pytest.mark.parametrize(("sigma", "q", "steps"), CASES)
def test_the_reused_composition_is_dp_accountings(sigma: float, q: float, steps: int) -> None:
    pld.plan_poisson_gaussian.cache_clear()
    one = pld_lib.from_gaussian_mechanism(
        standard_deviation=sigma, value_discretization_interval=1e-3, sampling_prob=q
    )
    theirs = one.self_compose(steps)
    plan = pld.plan_poisson_gaussian(sigma, q, steps)
    assert not plan.coarsened and len(plan.moments) == 2
    ours = pld._self_compose(plan.pld, steps, plan.moments)
    for a, b in ((theirs._pmf_remove, ours._pmf_remove), (theirs._pmf_add, ours._pmf_add)):
        assert a._lower_loss == b._lower_loss
        assert a._infinity_mass == b._infinity_mass
        assert np.array_equal(a._probs, b._probs)
    total = pld_lib.identity(1e-3).compose(theirs)
    for delta in (1e-5, 5.4e-6, 1e-7):
        expected = pld._epsilon_at(float(total.get_epsilon_for_delta(delta * (1 - 1e-6))))
        assert pld.pld_epsilon_dp_sgd(sigma, q, steps, delta) == expected
        # a call with the defaults spelt out finds the same plan (one PMF built, not two)
        assert pld.plan_poisson_gaussian(sigma, q, steps, share=1) is plan


def test_a_new_step_count_reuses_the_step() -> None:
    """Counts of one step share its PMF and moments: the second plan builds nothing."""
    pld.plan_poisson_gaussian.cache_clear()
    first = pld.plan_poisson_gaussian(1.12, 0.0042666666666666667, 14100)
    second = pld.plan_poisson_gaussian(1.12, 0.0042666666666666667, 10008)
    assert second.pld is first.pld and second.moments is first.moments
    assert pld._single_step.cache_info().misses == 1
