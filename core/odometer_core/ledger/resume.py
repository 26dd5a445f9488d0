"""A replay's position as JSON, so that a verification can resume from it in another process.

:class:`~odometer_core.ledger.replay.Replayer` holds, after the *n*-th entry, everything the
rest of a replay needs: the configuration and state (a partitioned dataset's aggregate and every
open block's run), the open reservations and the blocks they hold, the analysts' quota filters
and the reservations held at them, and the chain walker's position. :func:`replayer_to_json`
writes that lossless (configurations and states by the core's own lossless forms,
:func:`~odometer_core.accounting.config_to_json` and
:func:`~odometer_core.accounting.state_to_json`; a partitioned dataset's runs as one flat
list ``lo, hi, k, …`` with the *k*-th of its distinct states, which are few however many runs
there are), :func:`replayer_from_json` reads it back. Fed the same entries afterwards, the read
replayer reaches the same verdict as the one written (tested on every mode's ledgers).

Only a position reached without a problem is written (a replay that found one is not resumed:
its verdict already stands). What this module does not do is decide whether a stored position
can be trusted: the service keeps positions authenticated with its own key and resumes from
one only where the chain it has just re-hashed reaches the position's head with the same hash
(``docs/operations.md``, *Reports*).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any, Final

from odometer_core.accounting import (
    FilterState,
    Reservation,
    config_from_json,
    config_to_json,
    state_from_json,
    state_to_json,
)
from odometer_core.accounting.blocks import Blocks, Run
from odometer_core.ledger.blocks import BlockHistory, Partitioned, ranges_from_json, ranges_json
from odometer_core.ledger.chain import ChainWalker
from odometer_core.ledger.replay import Replayer

#: The form written by :func:`replayer_to_json`; another form is refused by the reader.
FORMAT: Final = "odometer-replay-position/1"


class PositionError(ValueError):
    """A stored position that cannot be read back (wrong form, or a replay with problems)."""


def replayer_to_json(replayer: Replayer) -> dict[str, Any]:
    """The position ``replayer`` reached, lossless; :class:`PositionError` if its replay found
    a problem (such a position is never resumed)."""
    if replayer.chain_problems or replayer.replay_problems or replayer.stopped:
        raise PositionError("a replay that found a problem has no position to resume from")
    config, state = replayer.config, replayer.state
    out: dict[str, Any] = {
        "format": FORMAT,
        "entries": replayer.entries,
        "head_hash": replayer.head_hash,
        "chain": {
            "prev_hash": replayer.chain.prev_hash,
            "position": replayer.chain.position,
            "dataset": replayer.chain.dataset,
        },
        "check_chain": replayer.check_chain,
        "config": None if config is None else config_to_json(config),
        "state": None,
        "blocks": None,
        "reservations": {k: r.to_json() for k, r in replayer.reservations.items()},
        "selections": {k: ranges_json(v) for k, v in replayer.selections.items()},
        "quotas": {
            analyst: {"config": config_to_json(c), "state": state_to_json(s), "grant": grant}
            for analyst, (c, s, grant) in replayer.quotas.items()
        },
        "quota_holds": {k: [a, g] for k, (a, g) in replayer.quota_holds.items()},
    }
    if isinstance(state, BlockHistory):
        out["blocks"] = _blocks_json(state)
    elif state is not None:
        out["state"] = state_to_json(state)
    return out


def replayer_from_json(obj: Mapping[str, Any]) -> Replayer:
    """The replayer written by :func:`replayer_to_json`; :class:`PositionError` when ``obj``
    is not of that form."""
    if not isinstance(obj, Mapping) or obj.get("format") != FORMAT:
        raise PositionError(f"not a replay position of the form {FORMAT}")
    try:
        return _read(obj)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PositionError(f"the replay position cannot be read: {exc!r}") from None


def _read(obj: Mapping[str, Any]) -> Replayer:
    chain = obj["chain"]
    replayer = Replayer(check_chain=bool(obj["check_chain"]))
    replayer.chain = ChainWalker(str(chain["prev_hash"]), int(chain["position"]), chain["dataset"])
    replayer.entries, replayer.head_hash = int(obj["entries"]), str(obj["head_hash"])
    config = None if obj["config"] is None else config_from_json(obj["config"])
    replayer.config = config
    if obj["blocks"] is not None:
        if config is None:
            raise PositionError("blocks without a configuration")
        replayer.state = _blocks_from_json(config, obj["blocks"])
    elif obj["state"] is not None:
        if config is None:
            raise PositionError("a state without a configuration")
        replayer.state = state_from_json(config, obj["state"])
    replayer.reservations = {
        str(k): Reservation.from_json(v) for k, v in obj["reservations"].items()
    }
    replayer.selections = {str(k): ranges_from_json(v) for k, v in obj["selections"].items()}
    replayer.quotas = {
        str(analyst): (
            (quota_config := config_from_json(q["config"])),
            state_from_json(quota_config, q["state"]),
            int(q["grant"]),
        )
        for analyst, q in obj["quotas"].items()
    }
    replayer.quota_holds = {str(k): (str(a), int(g)) for k, (a, g) in obj["quota_holds"].items()}
    return replayer


def _blocks_json(history: BlockHistory) -> dict[str, Any]:
    """A partitioned dataset's aggregate and runs; each distinct state written once."""
    index: dict[FilterState, int] = {}
    states: list[dict[str, Any]] = []
    runs: list[int] = []  # flat: lo, hi, state, lo, hi, state, … (reads back twice as fast)
    for run in history.blocks.runs:
        at = index.get(run.state)
        if at is None:
            at = index[run.state] = len(states)
            states.append(state_to_json(run.state))
        runs += (run.lo, run.hi, at)
    return {
        "aggregate": history.aggregate.to_json(),
        "opened": ranges_json(history.blocks.opened),
        "states": states,
        "runs": runs,
    }


def _blocks_from_json(config: Any, obj: Mapping[str, Any]) -> BlockHistory:
    states = [state_from_json(config, s) for s in obj["states"]]
    flat = obj["runs"]
    if len(flat) % 3 or not all(type(x) is int for x in flat):
        raise PositionError("the runs of a replay position are not triples of integers")
    runs = tuple(map(Run, flat[0::3], flat[1::3], map(states.__getitem__, flat[2::3])))
    if any(run.hi <= run.lo for run in runs) or any(
        before.hi > after.lo for before, after in pairwise(runs)
    ):
        raise PositionError("the runs of a replay position are not sorted, disjoint and non-empty")
    blocks = Blocks(runs, ranges_from_json(obj["opened"]))
    return BlockHistory(Partitioned.from_json(obj["aggregate"]), blocks)


__all__ = ["FORMAT", "PositionError", "replayer_from_json", "replayer_to_json"]
