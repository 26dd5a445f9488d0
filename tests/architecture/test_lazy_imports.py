"""Starting the server does not load the parts of scipy (nor dp_accounting) that only some
computations need.

Every server process (and every worker an operator restarts, every process the test suite
starts) imports :mod:`app.main` and makes the app. ``scipy.stats`` alone cost about 0.5 s of
that start's CPU when :mod:`odometer_core.accounting.bounds` imported it at module load,
``scipy.special`` about 0.1 s more through four modules of the core, ``dp_accounting`` would
cost 0.4 s. The modules named here are imported inside the functions that use them, so a
process pays for them only when it computes such a charge.

Checked in a fresh interpreter (``sys.modules`` after ``create_app()``), since this test
process has imported them long before. Shown able to fail: with ``from scipy import special,
stats`` back at the top of ``bounds.py`` the test lists ``scipy.special`` and ``scipy.stats``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: loaded by none of app.main's imports nor by create_app()
LAZY = ("scipy.special", "scipy.stats", "dp_accounting")

_PROBE = """
import json, sys
import app.main
app.main.create_app()
print(json.dumps(sorted(m for m in sys.modules if m.startswith(tuple(sys.argv[1:])))))
"""


def test_making_the_app_does_not_import_the_lazy_modules(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ODOMETER_", "DATABASE_"))}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'lazy.db'}"
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *LAZY],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m in LAZY] == []
