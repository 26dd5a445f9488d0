"""``python -m tests.concurrency.preloaded_serve``: ``python -m app.serve`` (same arguments, same
launcher) with the application factory imported once, before the workers start, and the workers
forked from the launcher instead of spawned.

``app.serve`` hands the workers to uvicorn, whose supervisor starts each one by ``spawn``: a new
interpreter that imports the whole app (numpy, scipy, SQLAlchemy, pydantic, the accounting core),
about 3 s of CPU each on a loaded 2-core machine, so a two-worker server cost about 6.5 s of CPU
to start. Tests that start many servers in a row (``tests/reliability/test_kill9.py`` starts one
per trial) use this launcher: the launcher imports the app once and each worker is a fork of it
(a fresh process all the same, with its own app built by the factory, its own engine and
connections: nothing but imported modules is made before the fork). What the workers run is the
app ``app.serve`` would run; only the start method differs. The spawned start itself stays
covered by every other multi-worker test server and by ``make run``'s tests.
"""

from __future__ import annotations

import importlib
import multiprocessing
import sys

import uvicorn._subprocess

from app import serve


def main() -> None:
    argv = sys.argv[1:]
    factory = argv[argv.index("--app") + 1] if "--app" in argv else serve.APP
    importlib.import_module(factory.split(":", 1)[0])
    # uvicorn's supervisor takes its workers' start method from this module-level context
    setattr(uvicorn._subprocess, "spawn", multiprocessing.get_context("fork"))  # noqa: B010
    serve.main(argv)


if __name__ == "__main__":
    main()
