"""The client's check before sending says what an out-of-domain amount must be.

``odometer datasets create --epsilon -1`` answered "matches none of the allowed forms" (an
amount is a JSON number or decimal text: ``anyOf`` in the contract, and -1 matches neither);
the client now says what the server says, "must be > 0", from the number form's bounds, for a
number and its text alike, and names the amount's domain when the value is not a number at all.
Shown failing on the code before: every row answered "… matches none of the allowed forms".
"""

from __future__ import annotations

from typing import Any

import pytest

from odometer_client import contract

DOMAIN = '(0 < ε ≤ 10⁶: an exact decimal, as a JSON number or as decimal text such as "1")'


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("epsilon", -1, "$.budget.epsilon: must be > 0, got -1"),
        ("epsilon", "-1", '$.budget.epsilon: must be > 0, got "-1"'),
        ("epsilon", 0, "$.budget.epsilon: must be > 0, got 0"),
        ("epsilon", "0.0", '$.budget.epsilon: must be > 0, got "0.0"'),
        ("epsilon", 2000000, "$.budget.epsilon: must be at most 1000000, got 2000000"),
        ("epsilon", "1e7", '$.budget.epsilon: must be at most 1000000, got "1e7"'),
        ("delta", "-0.1", '$.budget.delta: must be ≥ 0, got "-0.1"'),
        ("delta", 1, "$.budget.delta: must be < 1, got 1"),
        ("delta", "1.5", '$.budget.delta: must be < 1, got "1.5"'),
        ("epsilon", "1_0", f'$.budget.epsilon: "1_0" matches none of the allowed forms {DOMAIN}'),
        ("epsilon", " 1", f'$.budget.epsilon: " 1" matches none of the allowed forms {DOMAIN}'),
    ],
)
def test_a_budget_outside_its_domain_says_what_it_must_be(
    field: str, value: Any, problem: str
) -> None:
    budget = {"epsilon": "1", "delta": "0", field: value}
    assert contract.check("DatasetCreate", {"name": "x", "budget": budget}) == [problem]


def test_declarations_and_orders_say_it_too() -> None:
    assert contract.check(contract.MECHANISM, {"type": "pure_dp", "epsilon": "-1"}) == [
        '$.epsilon: must be ≥ 0, got "-1"'
    ]
    rdp = {"type": "rdp", "orders": ["1"], "values": ["0.1"]}
    assert contract.check(contract.MECHANISM, rdp) == ['$.orders[0]: must be > 1, got "1"']
    assert contract.check(contract.MECHANISM, {"type": "pure_dp", "epsilon": "0.5"}) == []


@pytest.mark.parametrize("text", ["1_0", " 1", "1 ", "\uff11", "\u0661", "NaN", "Infinity", "0x1"])
def test_a_declaration_builder_refuses_text_outside_the_grammar(text: str) -> None:
    """``pure_dp("1_0")`` built ε = 10 (``Decimal`` reads underscores) and sent "10"."""
    from odometer_client import declarations

    with pytest.raises(ValueError, match="not decimal text") as caught:
        declarations.pure_dp(text)
    assert str(caught.value) == (
        "not decimal text (ASCII digits with an optional fraction and exponent, such as 1, 0.5 "
        f"or 1e-6): {text!r}"
    )
    assert declarations.pure_dp("+0.5").to_json() == {"type": "pure_dp", "epsilon": "0.5"}
