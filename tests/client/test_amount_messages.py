"""A declaration builder reads only decimal text as the server reads it. (What a budget's
amount outside its domain says before sending is ``test_client_side_checks``'; a declaration's
amounts are the server's to judge.)"""

from __future__ import annotations

import pytest


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
