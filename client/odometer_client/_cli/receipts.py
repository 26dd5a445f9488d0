"""Receipts the client keeps: ``odometer register`` stores the receipt of each registration
it makes (the signed note the server answers with: dataset, entry ``seq``, entry hash, time),
and ``odometer receipts`` lists them. They are checked offline against a later signed head
with ``odometer verify-receipt`` (privacy-odometer-core; ``docs/ledger.md``, *Receipts*).

The store is one JSON line per receipt, with the server's URL, in
``$ODOMETER_DATA_DIR/receipts.jsonl`` (default ``$XDG_DATA_HOME/odometer``, else
``~/.local/share/odometer``). A receipt is public (it names hashes, not content): the file
needs no secrecy, only keeping. Nothing is stored when the server gave none (no checkpoint
key).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from odometer_client._cli.output import Output

STORE = "receipts.jsonl"


def data_dir() -> Path:
    explicit = os.environ.get("ODOMETER_DATA_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "odometer"


def keep(answer: dict[str, Any], url: str) -> bool:
    """Store the receipt of an answer (a 201, a settle or cancel), if it carries one; a store
    that cannot be written is a warning, never a failure of the registration itself."""
    receipt = answer.get("receipt")
    if not isinstance(receipt, dict):
        return False
    path = data_dir() / STORE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps({"server": url, "receipt": receipt}, sort_keys=True) + "\n")
    except OSError as exc:
        sys.stderr.write(f"warning: the receipt was not kept ({path}: {exc.strerror})\n")
        return False
    return True


def held() -> list[dict[str, Any]]:
    """The stored receipts, oldest first (an unreadable line is skipped, with a warning)."""
    path = data_dir() / STORE
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            doc["receipt"]["seq"]
        except (ValueError, KeyError, TypeError):
            sys.stderr.write(f"warning: {path}:{number} is not a kept receipt; skipped\n")
            continue
        out.append(doc)
    return out


def _list(args: argparse.Namespace) -> int:
    out = Output(sys.stdout)
    rows = [d for d in held() if args.dataset is None or d["receipt"]["dataset_id"] == args.dataset]
    if args.json:
        for doc in rows:
            out.line(json.dumps(doc, sort_keys=True))
        return 0
    if not rows:
        out.line(f"no receipts kept (in {data_dir() / STORE})")
        return 0
    table = [("dataset", "seq", "entry hash", "at", "server")]
    for doc in rows:
        r = doc["receipt"]
        table.append(
            (r["dataset_id"], str(r["seq"]), r["entry_hash"][:16] + "…", r["at"], doc["server"])
        )
    out.table(table)
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``receipts``."""
    cmd = sub.add_parser(
        "receipts",
        parents=[common],
        help="the receipts kept from registrations (check one: odometer verify-receipt)",
    )
    cmd.add_argument("dataset", nargs="?", help="only this dataset's (its id)")
    cmd.set_defaults(run=_list)
