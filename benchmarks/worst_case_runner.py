"""One case of ``benchmarks/worst_case.py``, decided in a process of its own.

Run as a script (``python -P benchmarks/worst_case_runner.py CASE PACKAGE ROOT``) by
:func:`benchmarks.worst_case.run_case`, with ``PYTHONPATH`` naming the checkout whose accounting
is measured: it decides one case (``CASE``: the JSON ``[mode, relation, accounting, mechanism]``)
with the accounting package ``PACKAGE`` (``odometer_core.accounting``, or ``app.accounting`` in a
checkout from before the core was split out), which must come from the checkout at ``ROOT``
(never the copy installed in the environment), and prints ``[CPU seconds, outcome]`` as JSON.

It imports nothing from ``benchmarks`` (the measured checkout may have none of it) and runs
with ``-P``, so that this directory does not shadow the checkout's modules.
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
from pathlib import Path


def decide(case: str, package_name: str, root: str) -> tuple[float, str]:
    """(CPU seconds of the decision alone, outcome) of one case."""
    import dp_accounting.pld.pld_privacy_accountant  # noqa: F401  imported before the clock starts

    package = importlib.import_module(package_name)
    origin = Path(str(package.__file__)).resolve()
    if not origin.is_relative_to(Path(root).resolve()):
        raise SystemExit(f"{package_name} was imported from {package.__file__}, not from {root}")
    mode, relation, accounting, mechanism = json.loads(case)
    del mode  # the accounting names it
    config = package.make_config(10, "1e-5", relation, accounting)
    state = package.initial_state(config)
    before = resource.getrusage(resource.RUSAGE_SELF)
    try:
        outcome = str(package.admit(config, state, package.parse_declaration(mechanism)).outcome)
    except Exception as exc:
        name = type(exc).__name__
        refused = name.endswith("DeclarationError") or name.startswith("Unsupported")
        outcome = ("422 " if refused else "500 ") + name
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, outcome


def main(argv: list[str] | None = None) -> int:
    case, package, root = argv if argv is not None else sys.argv[1:]
    print(json.dumps(decide(case, package, root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
