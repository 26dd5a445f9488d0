"""The client's generated files, committed so that neither its users nor its build need the
tools that make them:

- ``odometer_client/_sync/client.py``, the synchronous client, generated from the asynchronous
  one (``_async/client.py``) by unasync: one source for both;
- ``odometer_client/contract.json``, the request and response schemas of the server's committed
  OpenAPI document (``openapi/openapi.json``).

    python client/generate.py          # rewrite both
    python client/generate.py --check  # exit 1 if either committed file is stale
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

from odometer_client.contract import extract

PACKAGE = Path(__file__).resolve().parent / "odometer_client"
OPENAPI = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"
CONTRACT = PACKAGE / "contract.json"
SOURCE = PACKAGE / "_async" / "client.py"
TARGET = PACKAGE / "_sync" / "client.py"
HEADER = (
    "# Generated from odometer_client/_async/client.py by client/generate.py (unasync):\n"
    "# do not edit; edit the asynchronous source and run `make client-generated`.\n"
)
REPLACEMENTS = {
    "AsyncOdometerClient": "OdometerClient",
    "AsyncReservation": "Reservation",
    "AsyncClient": "Client",
    "AsyncBaseTransport": "BaseTransport",
    "aclose": "close",
    "asleep": "sleep",
    "aiter_bytes": "iter_bytes",
    "aread": "read",
}


def generated_contract() -> str:
    """``contract.json`` as extracted from the committed OpenAPI document now."""
    document = extract(json.loads(OPENAPI.read_text("utf-8")))
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def generated_sync() -> str:
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
    files = {TARGET: generated_sync(), CONTRACT: generated_contract()}
    if "--check" in argv:
        stale = [path.name for path, text in files.items() if path.read_text("utf-8") != text]
        for name in stale:
            print(f"{name} is stale: run `make client-generated`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
