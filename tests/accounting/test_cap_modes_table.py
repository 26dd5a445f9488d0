"""The table of docs/accounting.md, *Which cap accounts which declaration*, is the code's rule:
each row's marks equal :func:`~odometer_core.accounting.levels.cap_modes_for` of that kind's
example (one per kind: tests/accounting/test_declarations.py), every example has its row, and
a declaration a cap cannot account is refused by the cap's ``admit`` and by the levels with
the modes that would account it."""

from __future__ import annotations

from typing import Any

import pytest

from odometer_core.accounting import initial_state, make_config, parse_declaration
from odometer_core.accounting.levels import (
    CAP_MODES,
    RECOMMENDED_CAP_MODE,
    CapCannotAccount,
    cap_config,
    cap_modes_for,
    decide_levels,
    under_relation,
)
from tests.accounting.test_declarations import EXAMPLES
from tests.support import ROOT


def _label(example: dict[str, Any]) -> str:
    kind = str(example["type"])
    if kind == "report_noisy_max":
        return f"{kind}/{example['noise']}"
    if kind in ("subsampled", "repeat_and_select"):
        return f"{kind}/{example['mechanism']['type']}"
    if kind == "composed":
        parts = example.get("mechanisms") or [example["mechanism"]]
        return f"{kind}/" + "+".join(p["type"] for p in parts)
    return kind


def _table() -> dict[str, dict[str, bool]]:
    text = (ROOT / "docs" / "accounting.md").read_text("utf-8")
    section = text.split("#### Which cap accounts which declaration", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [
        cell.strip().strip("`").removesuffix("` cap") for cell in rows[0].strip("|").split("|")
    ]
    assert header[1:] == list(CAP_MODES), header
    table: dict[str, dict[str, bool]] = {}
    for line in rows[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert set(cells[1:]) <= {"yes", "—"}, line
        table[cells[0].strip("`")] = {
            m: c == "yes" for m, c in zip(CAP_MODES, cells[1:], strict=True)
        }
    return table


def test_the_documented_table_is_the_code() -> None:
    table = _table()
    assert set(table) == {_label(e) for e in EXAMPLES}
    for example in EXAMPLES:
        accounted = cap_modes_for(parse_declaration(example))
        assert table[_label(example)] == {m: m in accounted for m in CAP_MODES}, example


def test_the_recommended_cap_accounts_dp_sgd_and_everything_zcdp_does() -> None:
    table = _table()
    assert RECOMMENDED_CAP_MODE == "rdp"
    assert table["dp_sgd"]["rdp"] and not table["dp_sgd"]["zcdp"]
    assert all(row["rdp"] for row in table.values() if row["zcdp"])


@pytest.mark.parametrize("example", EXAMPLES, ids=_label)
def test_a_cap_that_cannot_account_it_refuses_it_with_the_modes_that_can(
    example: dict[str, Any],
) -> None:
    declaration = parse_declaration(example)
    replace_one = _label(example) == "sampled_with_replacement" or (
        example.get("scheme") == "without_replacement"
    )
    relation = "replace_one" if replace_one else "add_remove"
    dataset = make_config("1000", "0.001", relation, {"mode": "basic"})
    accounted = cap_modes_for(declaration)
    for mode in CAP_MODES:
        cap = under_relation(cap_config("10", "0.00001", {"mode": mode}), relation)
        upper = (cap, initial_state(cap))
        own = (dataset, initial_state(dataset))
        if mode in accounted:
            decided = decide_levels(own, declaration, organisation=upper, organisation_id="org_1")
            assert decided.upper("organisation") is not None
            continue
        with pytest.raises(CapCannotAccount) as refused:  # in a preview too
            decide_levels(
                own, declaration, organisation=upper, organisation_id="org_1", exhaustive=False
            )
        assert refused.value.modes == accounted
        assert f"organisation 'org_1': the organisation cap (mode '{mode}')" in str(refused.value)
