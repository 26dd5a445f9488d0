"""The second process of ``odometer verify --jobs 2``: the hash-chain walk of a JSON-lines export.

The walk needs two modules of the ledger package, :mod:`odometer_core.ledger.chain` and
:mod:`odometer_core.ledger.formats`, which import the standard library and orjson only. The
package's ``__init__`` also imports the replay and the checkpoints, hence the accounting core,
numpy and scipy: about a second of CPU that a walker started with ``spawn`` paid again on every
``verify --jobs 2``, for code it never runs (with 10^5 entries the two processes took longer
than one).

So the worker process — and only it, through the pool's ``initializer`` — registers the ledger
package as a bare package (its directory, its ``__init__`` not run) before importing the two
modules. ``spawn`` is kept: a fresh interpreter is the one start method that is safe whatever
threads the parent holds (the default on Windows and macOS, and what ``fork`` of a parent with
threads is not), and a single worker per run gains nothing from a fork server, which would
itself be a fresh interpreter importing the same modules once per run.

This module imports nothing of the package at load: unpickling :func:`walk_chain_file` in the
worker loads this file only.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odometer_core.ledger.chain import ChainProblem

_LEDGER = "odometer_core.ledger"


def light_ledger() -> None:
    """In the walker process: make ``odometer_core.ledger`` a package whose ``__init__`` is not
    run, so that importing its ``chain`` and ``formats`` submodules loads them alone.

    Does nothing if the package is already imported (a worker forked from a parent that has it).
    """
    if _LEDGER in sys.modules:
        return
    import odometer_core

    package = types.ModuleType(_LEDGER)
    package.__path__ = [str(Path(odometer_core.__file__).parent / "ledger")]
    package.__package__ = _LEDGER
    sys.modules[_LEDGER] = package


def walk_chain_file(path: str) -> list[ChainProblem]:
    """The hash-chain defects of a JSON-lines export.

    Stops quietly at an unreadable line: the replaying process reads the same bytes and
    reports it.
    """
    from odometer_core.ledger.chain import ChainWalker
    from odometer_core.ledger.formats import UnreadableLine, iter_jsonl_export

    walker = ChainWalker(strict_json=True)
    problems: list[ChainProblem] = []
    with Path(path).open(encoding="utf-8") as stream:
        try:
            for entry in iter_jsonl_export(stream, strict=True):
                problems.extend(walker.check(entry))
        except UnreadableLine:
            pass
    return problems
