"""``odometer receipts``: the receipts the client keeps (:mod:`odometer_client.receipts`, the
one store: every registration, settlement and cancellation made through the client, ``odometer
register`` among them), listed; checked offline against a later signed head with ``odometer
verify-receipt`` (privacy-odometer-core; ``docs/ledger.md``, *Receipts*). A receipt the store
could not keep, or a line of it that is not one, is a ``warning:`` line on stderr
(:func:`warnings_said`), never a failure."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from odometer_client._cli.output import Output
from odometer_client.receipts import ReceiptStore, ReceiptStoreWarning


@contextmanager
def warnings_said() -> Iterator[None]:
    """The store's warnings raised in the block, each as one ``warning:`` line on stderr (the
    command line's form) rather than Python's."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReceiptStoreWarning)
        try:
            yield
        finally:
            for warning in caught:
                if issubclass(warning.category, ReceiptStoreWarning):
                    sys.stderr.write(f"warning: {warning.message}\n")
                else:
                    warnings.warn_explicit(
                        warning.message, warning.category, warning.filename, warning.lineno
                    )


def _list(args: argparse.Namespace) -> int:
    out = Output(sys.stdout)
    store = ReceiptStore()
    with warnings_said():
        rows = store.held(args.dataset)
    if args.json:
        for kept in rows:
            out.line(json.dumps(kept.to_json(), sort_keys=True))
        return 0
    if not rows:
        out.line(f"no receipts kept (in {store.path})")
        return 0
    table = [("dataset", "seq", "entry hash", "at", "server")]
    for kept in rows:
        table.append(
            (kept.dataset_id, str(kept.seq), kept.entry_hash[:16] + "…", kept.at, kept.server)
        )
    out.table(table)
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``receipts``."""
    cmd = sub.add_parser(
        "receipts",
        parents=[common],
        help="the receipts kept from registrations, settlements and cancellations (check one: "
        "odometer verify-receipt)",
    )
    cmd.add_argument("dataset", nargs="?", help="only this dataset's (its id)")
    cmd.set_defaults(run=_list)
