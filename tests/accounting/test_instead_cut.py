"""A search for what would fit that its CPU bound cuts keeps every suggestion whole: an
alternative is a declaration in the form the refused one was sent in, or absent.

The repeated mechanism of ``tests/api/test_instead_held.py`` (20 Gaussians of σ 10), decided
here by a closed-form admission (Σ count/σ² ≤ 0.04: 4 repeats of σ 10 fit, the noise factor's
edge is √5) that stops the search (:class:`~odometer_core.accounting.summary.SearchStopped`)
after ``limit`` candidates, every ``limit`` from 0 (a bound of 0 s: nothing tried) to past the
whole search. Before the fix a search cut after the count's first candidate (1) returned it as
``{"type": "composed", "mechanisms": [gaussian]}``, without the ``mechanism`` and ``count`` its
text ("count ≤ 1") names, and a search cut during the noise factor's bisection kept the count at
1: the count's bisection ran last, so it was the one cut.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from odometer_core.accounting import instead as held
from odometer_core.accounting.declarations import Composed, Declaration, Gaussian, parse_declaration
from odometer_core.accounting.summary import DIGITS, KNOBS, SearchStopped

GAUSSIAN = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}
REPEATED = {"type": "composed", "mechanism": GAUSSIAN, "count": 20}
#: The admission's bound on Σ count/σ²: 4 Gaussians of σ 10 (0.04), not 5.
LIMIT = Decimal("0.04")
#: Candidates the whole search tries (brackets: noise factor 2, 4; count 1; the count's
#: bisection 10, 5, 3, 4; then the noise factor's to SEARCH_DIGITS digits).
COUNT_FOUND_AFTER = 7


def _admits(declaration: Declaration) -> bool:
    assert isinstance(declaration, Composed)
    total = Decimal(0)
    for item, count in declaration.items:
        assert isinstance(item, Gaussian)
        total += count * (item.sensitivity / item.sigma) ** 2
    return total <= LIMIT


def _cut(limit: int) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[str], int]:
    tried = 0

    def admits(declaration: Declaration) -> bool:
        nonlocal tried
        if tried >= limit:
            raise SearchStopped
        tried += 1
        return _admits(declaration)

    rules = held.Rules(KNOBS, DIGITS, SearchStopped)
    found = held.suggest(parse_declaration(REPEATED), admits, rules)
    return (*found, tried)


@pytest.mark.parametrize("limit", range(0, 30))
def test_a_cut_search_returns_whole_alternatives_or_none(limit: int) -> None:
    suggestion, alternatives, phrases, tried = _cut(limit)
    assert tried <= limit
    if suggestion is not None:
        assert suggestion["count"] == 20 and _admits(parse_declaration(suggestion))
    assert len(alternatives) <= 1
    for fewer in alternatives:
        assert set(fewer) == {"type", "mechanism", "count"}, fewer
        assert fewer["mechanism"] == GAUSSIAN and 1 <= fewer["count"] <= 4
        assert _admits(parse_declaration(fewer))
        assert phrases[-1] == f"count ≤ {fewer['count']}"
    if limit == 0:
        assert (suggestion, alternatives, phrases) == (None, [], [])
    if limit >= COUNT_FOUND_AFTER:
        # the count's edge is found before the noise factor is narrowed
        assert alternatives == [{**REPEATED, "count": 4}]


def test_the_whole_search_finds_both_edges() -> None:
    suggestion, alternatives, phrases, tried = _cut(1000)
    assert alternatives == [{**REPEATED, "count": 4}]
    assert suggestion == {**REPEATED, "mechanism": {**GAUSSIAN, "sigma": "22.37"}}
    assert phrases == ["composed with noise factor ≥ 2.237", "count ≤ 4"]
    assert tried < 30
