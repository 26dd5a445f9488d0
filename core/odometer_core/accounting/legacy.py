"""Reading what earlier accounting versions wrote.

Every ledger entry records the accounting version it was written with, and entries are
append-only: an entry keeps the JSON it was hashed with forever. When a version renames a stored
field, the replay upgrades older entries with the functions here before re-running them, so a
ledger that spans versions still verifies end to end.

Version 1.1.0 renamed two things so that each name says one thing:

- in ``zcdp`` and ``rdp`` the share δ_c of δ_B that pays for converting the filter's total into
  (ε, δ) is ``final_conversion_delta``; 1.0.0 called it ``delta_conversion``, one transposition
  away from ``basic`` mode's unrelated per-invocation ``conversion_delta``;
- the fixed parts of a ``split`` budget are *sub-budgets* (``sub_budgets`` in a configuration and
  a state, ``sub_budget`` in a request and a reservation); 1.0.0 called them ``ledgers`` /
  ``ledger``, the word the service also uses for its audit log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

VERSION_1_0: Final = "1.0.0"

VERSION_1_1: Final = "1.1.0"
"""Same fields as 1.2.0. Version 1.2.0 bounds the work of one charge (``basic`` mode; see
``docs/accounting.md``, *Bounded work*) and so differs from 1.1.0 only where 1.1.0 took
seconds to hours of CPU: a refusal decided on a lower bound records that bound as ``requested``;
a PLD whose default grid exceeds the work limit is computed on a coarser grid; a ``composed``
declaration with more than four PLD items charges them by RDP inside its basic-composition
candidate. A 1.1.0 ledger without such entries replays identically under 1.2.0."""

VERSION_1_2: Final = "1.2.0"
"""Same fields as 1.3.0. Version 1.3.0 adds the ``wor_bound`` of an ``rdp`` configuration: new
datasets charge a Gaussian subsampled without replacement by the smaller of WBK19 Thm 27 and
Birrell–Ebrahimi–Behnia–Pacheco 2024 Thm 3.4 (``docs/accounting.md``, *Without-replacement
Gaussian*). A configuration without the field, as every 1.2.0 one, charges by WBK19 alone, as
1.2.0 did, so a 1.2.0 ledger replays identically under 1.3.0."""

VERSION_1_3: Final = "1.3.0"
"""Same fields as 1.4.0, which keeps every certified statement true under budget changes and
grant changes (``docs/accounting.md``, *Budget changes*): configurations created since carry
their creation anchor, and reservations record the grant that reserved them. A 1.3.0
configuration has no anchor and keeps the rules it was created with, so a 1.3.0 ledger replays
identically under 1.4.0."""

VERSION_1_4: Final = "1.4.0"
"""Same fields as 1.5.0, which charges a ``composed`` declaration in ``basic`` mode by the joint
privacy-loss distribution of its list where every item has one (``docs/accounting.md``, *Joint
PLD of a composed list*): ``basic`` configurations created since say ``"composed":
"joint_pld"``. A configuration without the field, as every 1.4.0 one, charges each list as
1.4.0 did, so a 1.4.0 ledger replays identically under 1.5.0. Likewise ``rdp`` configurations
made since on the default grid without a workload say ``"order_weights":
"first_declaration"`` (the weights chosen by the first declaration admitted, recorded in the
state as ``first``); one without the field keeps its stored weights and writes its states as
1.4.0 did."""

VERSION_1_5: Final = "1.5.0"
"""Same fields as 1.6.0, whose ``rdp`` configurations take their certified reading as the
smallest of several statements fixed at creation (``docs/accounting.md``, *Readings as the
smallest of several statements*): configurations created since carry the PLD branch's δ split
(``"branch"``) and their states the branch's statement (``"pld"``). A configuration without the
field, as every 1.5.0 one, keeps its ladder on the whole of δ_c and its readings, and writes its
states as 1.5.0 did, so a 1.5.0 ledger replays identically under 1.6.0."""

VERSION_1_6: Final = "1.6.0"
"""Same fields as 1.7.0, whose ``zcdp`` and ``gdp`` configurations record their ladder's shape
(``"ladder"``: spacing 2^(1/6), level 1's share and the decades below the budget evenly shared,
``docs/accounting.md``, *Readings as the smallest of several statements*) and read (0, 0) while
nothing was released. A configuration without the field, as every 1.6.0 one, keeps the 1.4.0
ladder and its readings, so a 1.6.0 ledger replays identically under 1.7.0."""

VERSION_1_7: Final = "1.7.0"
"""Same fields as 1.8.0, whose ``rdp`` configurations on the default grid without a workload
record their ladder's shape (``"ladder"``: spacing 2^(1/6), level 1 at 0.9 of the pool as
before, the levels below and above placed by the first declaration's curve, each at the order
that converts it best, the grid extended by orders only the levels use; ``docs/accounting.md``,
*Readings as the smallest of several statements*), and their states the first declaration's
curve (``"design"``). A configuration without the field, as every 1.7.0 one, keeps its
per-order ladders and its readings and writes its states as 1.7.0 did, so a 1.7.0 ledger
replays identically under 1.8.0."""

VERSION_1_8: Final = "1.8.0"
"""Same fields as 1.9.0, whose ``zcdp`` and ``gdp`` configurations say ``"ladder_rule":
"first_declaration"``: the ladder's shape (spacing, level 1's share, the shares below) is chosen
at the first admission from that declaration's charge (ρ or μ²) and the creation target alone,
among the shapes of ``python -m benchmarks quote``'s family, and recorded in the state with it
(``"first"``: the charge and the shape), which a replay recomputes; the first declaration is
admitted by the filter of that shape, and the shape is never chosen again
(``docs/accounting.md``, *Ladders shaped by the first declaration*). A configuration without
the field, as every 1.8.0 one, keeps the shape it records (1.7.0's constant) and its readings,
and writes its states as 1.8.0 did, so a 1.8.0 ledger replays identically under 1.9.0."""

VERSION_1_9: Final = "1.9.0"
"""Same fields as 1.10.0, whose ``rdp`` configurations on the default grid without a workload
say ``"ladder_rule": "first_declaration"``: the shaped ladder's spacing and span are chosen at
the first admission from that declaration's curve and the creation target alone, among the
shaped members of ``python -m benchmarks quote``'s family, and recorded in the state
(``"ladder"``), which a replay recomputes; level 1 (0.9 of the pool) is the same in every
candidate, and the shape is never chosen again (``docs/accounting.md``, *rdp: the ladder shaped
by the first declaration*). A configuration without the field, as every 1.9.0 one, keeps the
shape it records (34 levels 2^(1/6) apart at whole repeats) and its readings, and writes its
states as 1.9.0 did, so a 1.9.0 ledger replays identically under 1.10.0."""

#: The versions before 1.4.0, replayed with the rules of their time: budget changes derived a
#: filter's thresholds again from the new target (``change_budget(..., anchored=False)``), and
#: settles and cancels finished a reservation at the analyst's quota in force.
BEFORE_1_4: Final = (VERSION_1_0, VERSION_1_1, VERSION_1_2, VERSION_1_3)

_RENAMED_1_0: Final = {
    "delta_conversion": "final_conversion_delta",
    "ledgers": "sub_budgets",
    "ledger": "sub_budget",
}


def _renamed(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {_RENAMED_1_0.get(k, k): v for k, v in obj.items()}


def upgrade_config(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A configuration as written by version 1.0.0, in today's form (sub-budgets included)."""
    if obj is None:
        return None
    out = _renamed(obj)
    if isinstance(out.get("sub_budgets"), list):
        out["sub_budgets"] = [_renamed(item) for item in out["sub_budgets"]]
    return out


def upgrade_flat(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A state, a reservation or a request's extras, in today's field names."""
    return None if obj is None else _renamed(obj)


def upgrade_level(part: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What an entry records of an upper budget level (its config, state and reservation)."""
    if part is None:
        return None
    out = dict(part)
    if "config" in out:
        out["config"] = upgrade_config(out["config"])
    if "reservation" in out:
        out["reservation"] = upgrade_flat(out["reservation"])
    return out


def upgrade_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A version 1.0.0 ledger entry with today's field names (its hash is left as written:
    the chain is checked on the entry as stored, before it is upgraded)."""
    out = dict(entry)
    out["config"] = upgrade_config(entry.get("config"))
    for name in ("request", "state", "reservation"):
        out[name] = upgrade_flat(entry.get(name))
    for level in ("org", "quota"):
        if entry.get(level) is not None:
            out[level] = upgrade_level(entry.get(level))
    return out
