"""``odometer witness``: the witness of ledger heads (admin): its state, a check now, and the
recovery of a dataset whose ledger is behind it (``docs/witness.md``).

odometer witness status
odometer witness check
odometer witness import DATASET EXPORT         the lost tail, from an export taken before
odometer witness acknowledge DATASET --reason TEXT
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from odometer_client._cli.output import Output
from odometer_client._cli.run import command
from odometer_client._sync.client import OdometerClient
from odometer_client.models import (
    decimals,
)
from odometer_client.results import (
    WitnessState,
)


def _show(status: WitnessState, out: Output, json_output: bool) -> int:
    if json_output:
        out.json(decimals(status.raw))
        return 0
    if not status.enabled:
        out.line("witness: disabled (ODOMETER_WITNESS_DIR is unset)")
        return 0
    signed = "signed" if status.signed else "unsigned"
    out.line(f"witness: {status.location} ({signed})")
    if not status.frozen:
        out.line("no dataset is behind the witness")
        return 0
    rows = [["dataset", "reason", "witnessed seq", "database seq"]]
    rows += [
        [f.dataset_id, f.reason, str(f.witnessed_seq), str(f.database_seq)] for f in status.frozen
    ]
    out.table(rows)
    return 1


def _status(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    return _show(client.witness(), out, args.json)


def _check(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    return _show(client.check_witness(), out, args.json)


def read_entries(path: str) -> list[dict[str, Any]]:
    """The entries of a JSON (``{"entries": [...]}`` or a list) or JSON-lines export."""
    text = Path(path).read_text("utf-8")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(doc, dict):
        doc = doc.get("entries", [])
    return [e for e in doc if isinstance(e, dict) and "seq" in e]


def _import(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    entries = read_entries(args.export)
    done = client.import_ledger_tail(args.dataset, entries)
    if args.json:
        out.json(decimals(done.raw))
    else:
        out.line(
            f"imported {done.imported} entries: dataset {done.dataset_id} is at seq "
            f"{done.seq} again and serves writes"
        )
    return 0


def _acknowledge(args: argparse.Namespace, client: OdometerClient, out: Output) -> int:
    done = client.acknowledge_ledger_loss(args.dataset, args.reason)
    if args.json:
        out.json(decimals(done.raw))
    else:
        lost = done.lost or {}
        out.line(
            f"loss of entries {lost['database_seq'] + 1}..{lost['witnessed_seq']} acknowledged "
            f"(ledger entry {done.seq}): dataset {done.dataset_id} serves writes"
        )
        signed = lost.get("signed_head")
        if signed:  # the fork, named in the entry (docs/ledger.md, *Forks and acknowledged …*)
            out.line(
                f"the entry names the last head the witness cosigned before the loss: size "
                f"{signed['size']}, root {signed['root']}"
            )
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``witness``."""
    witness = sub.add_parser(
        "witness", help="the witness of ledger heads: status, check, recovery (admin)"
    )
    wsub = witness.add_subparsers(dest="witness_command", required=True)
    wsub.add_parser(
        "status", parents=[common], help="datasets refusing writes (exit 1 if any)"
    ).set_defaults(run=command(_status))
    wsub.add_parser(
        "check", parents=[common], help="compare the database with the witness now"
    ).set_defaults(run=command(_check))
    imp = wsub.add_parser(
        "import", parents=[common], help="import a dataset's lost tail from an export"
    )
    imp.add_argument("dataset")
    imp.add_argument("export", help="JSON or JSON-lines export taken before the loss")
    imp.set_defaults(run=command(_import))
    ack = wsub.add_parser(
        "acknowledge", parents=[common], help="give up a dataset's lost tail (a ledger entry)"
    )
    ack.add_argument("dataset")
    ack.add_argument("--reason", required=True, help="recorded in the ledger")
    ack.set_defaults(run=command(_acknowledge))
