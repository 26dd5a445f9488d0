"""Charges computed once, ahead of the decision that needs them.

The expensive part of a decision — a declaration's charge in a mode (a PLD, an RDP curve, a
lower bound) — depends on the declaration and the configuration, never on the state. The service
therefore computes it *before* taking the budget's lock (in a worker process it can abandon), and
the decision under the lock only looks it up. The functions that compute a charge are marked
:func:`memoised`; within :func:`charges` their results are kept in a table keyed by the function
and its arguments (the declaration, the conversion δ, the relation, the orders: everything the
value depends on), so a result computed for a configuration that changed in between is simply
not found and is computed again. Outside :func:`charges` they are plain calls, as the offline
verifier and the tests use them.

The table is a plain dict of picklable keys and values: a worker process fills one and sends it
back, and the request that asked for it installs it with ``charges(table)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: The table of the current context (a request, a worker's job), or ``None``: no memo.
_TABLE: ContextVar[dict[Hashable, Any] | None] = ContextVar("charges", default=None)


def memoised(fn: Callable[P, R]) -> Callable[P, R]:
    """Keep ``fn``'s results in the current :func:`charges` table (positional, hashable
    arguments only)."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        table = _TABLE.get()
        if table is None or kwargs:
            return fn(*args, **kwargs)
        key = (name, args)
        if key in table:
            result: R = table[key]
            return result
        value = fn(*args, **kwargs)
        table[key] = value
        return value

    return wrapper


@contextmanager
def charges(known: dict[Hashable, Any] | None = None) -> Iterator[dict[Hashable, Any]]:
    """Within the block, memoised charges are looked up in (and added to) ``known``; without
    it, in the table of an enclosing block if there is one (a capacity count inside a preview
    reuses the charges computed for it, by a charge worker within its CPU budget), else in a
    new table."""
    table = known if known is not None else _TABLE.get()
    if table is None:
        table = {}
    token = _TABLE.set(table)
    try:
        yield table
    finally:
        _TABLE.reset(token)
