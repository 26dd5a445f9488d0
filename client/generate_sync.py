"""Generate the synchronous client from the asynchronous one (unasync): one source for both.

    python client/generate_sync.py          # rewrite odometer_client/_sync/client.py
    python client/generate_sync.py --check  # exit 1 if the committed file is stale

Needs ``unasync`` (a development dependency); the generated file is committed, so neither the
client's users nor its build need it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

PACKAGE = Path(__file__).resolve().parent / "odometer_client"
SOURCE = PACKAGE / "_async" / "client.py"
TARGET = PACKAGE / "_sync" / "client.py"
HEADER = (
    "# Generated from odometer_client/_async/client.py by client/generate_sync.py (unasync):\n"
    "# do not edit; edit the asynchronous source and run `make client-sync`.\n"
)
REPLACEMENTS = {
    "AsyncOdometerClient": "OdometerClient",
    "AsyncReservation": "Reservation",
    "AsyncClient": "Client",
    "AsyncBaseTransport": "BaseTransport",
    "aclose": "close",
    "asleep": "sleep",
}


def generated() -> str:
    """The synchronous client's text, as generated from the asynchronous source now."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "_async" / "client.py"
        source.parent.mkdir()
        source.write_text(SOURCE.read_text("utf-8"), "utf-8")
        rule = unasync.Rule("/_async/", "/_sync/", additional_replacements=REPLACEMENTS)
        unasync.unasync_files([str(source)], [rule])
        text = (Path(tmp) / "_sync" / "client.py").read_text("utf-8")
    # shorter names can put a call on one line again: format as the rest of the code is
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=HEADER + text,
        capture_output=True,
        text=True,
        check=True,
    )
    return formatted.stdout


def main(argv: list[str]) -> int:
    text = generated()
    if "--check" in argv:
        if TARGET.read_text("utf-8") != text:
            print(f"{TARGET.name} is stale: run `make client-sync`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
