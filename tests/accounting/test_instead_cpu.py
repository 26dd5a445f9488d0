"""The CPU a refused training job's ``instead`` search spends (#49): the MNIST tutorial's job
(N = 60,000, batch 256, σ = 1.12, 14,100 steps) refused by an rdp dataset of (2, 10⁻⁵), where
every candidate may cost a PLD of the branch (the job's ε_i at its δ slot).

The search is bounded as the service bounds it (:func:`odometer_core.ledger.admission._bounded`:
no candidate is started once :data:`~app.services.registration.SEARCH_SECONDS` of the thread's
CPU are spent) at the service's own value, not raised. Within it the refusal names the three
things that fit — a noise multiplier, a step count and a sampling rate — each admitted by the
filter itself. Before the search was breadth first it bisected the noise multiplier first, with
a PLD per candidate: within the same bound it found nothing (``instead`` null, no alternatives).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal

from app.services.registration import SEARCH_SECONDS
from odometer_core.accounting import (
    AccountingConfig,
    Declaration,
    FilterState,
    admit,
    initial_state,
    make_config,
    parse_declaration,
)
from odometer_core.accounting.instead import SEARCH_DIGITS
from odometer_core.accounting.summary import SearchStopped, refusal

JOB = {
    "type": "dp_sgd",
    "noise_multiplier": "1.12",
    "sample_rate": "0.0042666666666666667",
    "steps": 14100,
}


def _refused() -> tuple[AccountingConfig, FilterState, Declaration, str | None]:
    config = make_config("2", "0.00001", "add_remove", {"mode": "rdp"})
    state = initial_state(config)
    job = parse_declaration(JOB)
    decision = admit(config, state, job)
    assert not decision.admitted
    return config, state, job, decision.reason


def _bounded(
    config: AccountingConfig, state: FilterState, seconds: float, started: list[float]
) -> Callable[[Declaration], bool]:
    """The filter's admission, stopped as the service stops it: before a candidate, once
    ``seconds`` of this thread's CPU are spent; ``started`` gets the CPU at which each
    candidate started."""
    start = time.thread_time()

    def admits(candidate: Declaration) -> bool:
        now = time.thread_time() - start
        if now > seconds:
            raise SearchStopped
        started.append(now)
        return admit(config, state, candidate).admitted

    return admits


def _next(value: str, up: bool) -> Decimal:
    """The value one unit of the searched digits past ``value`` (up or down)."""
    d = Decimal(value)
    unit = Decimal(1).scaleb(d.adjusted() - SEARCH_DIGITS + 1)
    return d + unit if up else d - unit


def test_the_tutorial_jobs_search_finds_all_three_within_the_services_bound() -> None:
    config, state, job, reason = _refused()
    started: list[float] = []
    cpu = time.thread_time()
    summary = refusal(
        config,
        state,
        job,
        level="dataset",
        reason=reason,
        admits=_bounded(config, state, SEARCH_SECONDS, started),
    )
    cpu = time.thread_time() - cpu
    instead = summary["instead"]
    assert instead is not None, (summary["text"], started, cpu)
    fewer, lower = summary["alternatives"]
    assert Decimal(instead["noise_multiplier"]) > Decimal("1.12")
    assert fewer["steps"] < JOB["steps"]
    assert Decimal(lower["sample_rate"]) < Decimal("0.0042666666666666667")
    for suggestion in (instead, fewer, lower):
        assert admit(config, state, parse_declaration(suggestion)).admitted, suggestion
    # each found with its first candidate (one PLD each: the third started within the bound)
    assert len(started) >= 3 and started[2] <= SEARCH_SECONDS, (started, cpu)


def test_given_the_cpu_the_search_reaches_each_edge() -> None:
    """Unbounded, the same search goes on to each knob's edge: the next value at the searched
    digits (one step more, a higher rate, less noise) is refused."""
    config, state, job, reason = _refused()
    summary = refusal(config, state, job, level="dataset", reason=reason)
    instead = summary["instead"]
    assert instead is not None, summary["text"]
    fewer, lower = summary["alternatives"]
    past = [
        {**instead, "noise_multiplier": str(_next(instead["noise_multiplier"], up=False))},
        {**fewer, "steps": fewer["steps"] + 1},
        {**lower, "sample_rate": str(_next(lower["sample_rate"], up=True))},
    ]
    for suggestion, beyond in zip((instead, fewer, lower), past, strict=True):
        assert admit(config, state, parse_declaration(suggestion)).admitted, suggestion
        assert not admit(config, state, parse_declaration(beyond)).admitted, beyond
