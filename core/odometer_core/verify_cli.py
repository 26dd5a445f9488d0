"""The core's commands on the ``odometer`` command line (its ``odometer.commands`` plug-in):
``verify`` and ``verify-organisation`` (:mod:`odometer_core.verify`), ``verify-receipt`` and
``witness-keygen`` (:mod:`odometer_core.verify_receipts`).

Every ``odometer`` command, a client one too, builds the whole parser first, so this module
holds only the arguments: each command's run function imports its verifier when it runs. The
verifiers import the ledger, and the ledger the accounting core and scipy: about a second of
CPU that ``odometer --help`` and every command of the server's would otherwise pay
(tests/client/test_cli_startup.py).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def _verify(args: argparse.Namespace) -> int:
    from odometer_core.verify import run_verify

    return run_verify(args)


def _verify_organisation(args: argparse.Namespace) -> int:
    from odometer_core.verify import run_verify_organisation

    return run_verify_organisation(args)


def _verify_receipt(args: argparse.Namespace) -> int:
    from odometer_core.verify_receipts import verify_receipt

    return verify_receipt(args)


def _witness_keygen(args: argparse.Namespace) -> int:
    from odometer_core.verify_receipts import witness_keygen

    return witness_keygen(args)


def _add_fork_options(cmd: argparse.ArgumentParser) -> None:
    """``--cosigner``, ``--quorum`` and ``--forks``, of ``verify`` and ``verify-receipt``."""
    cmd.add_argument(
        "--cosigner",
        action="append",
        metavar="VKEY",
        help="a witness's verifier key (name+ID+base64, or a file holding it): report "
        "whether it cosigned each head (repeatable); a cosignature that does not verify is "
        "reported and never counted",
    )
    cmd.add_argument(
        "--quorum",
        type=int,
        default=0,
        metavar="N",
        help="fail unless at least N of the --cosigner witnesses cosigned each head checked "
        "(default 0: report only)",
    )
    cmd.add_argument(
        "--forks",
        metavar="FILE",
        help="the JSON of GET …/ledger/forks: the operator's acknowledged losses, proven in a "
        "signed head; a receipt or earlier head they explain is reported FORKED (exit 3)",
    )


def _add_since_options(verify: argparse.ArgumentParser) -> None:
    """``verify --since`` and what goes with it (:func:`odometer_core.verify_receipts.since`)."""
    verify.add_argument(
        "--since",
        metavar="HEAD",
        help="a signed tree head held earlier (note, or the JSON of …/ledger/checkpoint): the "
        "export's tree, or the --head's by the --consistency proof, must extend it",
    )
    verify.add_argument(
        "--head", metavar="FILE", help="with --since and no export: the newer signed head"
    )
    verify.add_argument(
        "--consistency",
        metavar="FILE",
        help="with --since and no export: the JSON of …/ledger/consistency?from=OLD&to=NEW",
    )
    _add_fork_options(verify)


def _add_verify_organisation(sub: Any) -> None:
    organisation = sub.add_parser(
        "verify-organisation",
        help="replay every dataset's export of one organisation and its cap across them",
    )
    organisation.add_argument(
        "exports",
        nargs="+",
        metavar="EXPORT",
        help="JSON, JSON-lines or CSV export of each dataset's whole ledger (every dataset "
        "of the organisation: a missing one is reported)",
    )
    organisation.set_defaults(run=_verify_organisation)


def _add_verify(sub: Any) -> None:
    verify = sub.add_parser("verify", help="replay a ledger export and check its hash chain")
    verify.add_argument(
        "export",
        nargs="?",
        help="JSON or CSV export of one dataset's whole ledger ('-' = stdin)",
    )
    verify.add_argument(
        "--checkpoints",
        metavar="FILE",
        help="signed checkpoints (JSON lines or the JSON of GET …/checkpoints) to check the "
        "export against: signatures, (seq, hash) on the chain, no truncation",
    )
    verify.add_argument(
        "--public-key",
        metavar="PEM",
        help="the operator's checkpoint public key (PEM, obtained out of band): the export's "
        "signed closing head, the checkpoints and the witness's signed records are checked "
        "against it",
    )
    verify.add_argument(
        "--unpinned",
        action="store_true",
        help="accept an export whose end no signed head pins (an older export, a service "
        "that signs no heads, no --public-key at hand), with a warning: entries cut off its "
        "end would go unnoticed",
    )
    verify.add_argument(
        "--witness",
        metavar="DIR",
        help="a copy of the service's witness directory: the export must reach the "
        "dataset's witnessed head with the same hash there (docs/witness.md)",
    )
    verify.add_argument(
        "--jobs",
        type=int,
        choices=[0, 1, 2],
        default=0,
        help="processes for a JSON-lines export: 2 walks the chain beside the replay, "
        "0 (default) picks 2 for large files on a multi-core machine",
    )
    verify.add_argument(
        "--output",
        action="append",
        metavar="INV=FILE",
        help="a published output of invocation INV (JSON, numbers as integers or decimal "
        "strings): its settlement must record its SHA-256 and charge its cell (repeatable)",
    )
    _add_since_options(verify)
    verify.set_defaults(run=_verify)


def _add_receipts(sub: Any) -> None:
    keygen = sub.add_parser(
        "witness-keygen",
        help="a new key for the witness of ledger heads to cosign with (ODOMETER_WITNESS_KEY)",
    )
    keygen.add_argument("name", help="the witness's key name (no spaces, no '+')")
    keygen.add_argument("--out", "-o", required=True, help="file for the secret key (created)")
    keygen.set_defaults(run=_witness_keygen)
    cmd = sub.add_parser(
        "verify-receipt",
        help="check receipts against a later signed head and its inclusion proof (offline)",
    )
    cmd.add_argument(
        "receipts", help="a receipt's JSON, or JSON lines (`odometer receipts --json`); '-' = stdin"
    )
    cmd.add_argument(
        "--head",
        required=True,
        metavar="FILE",
        help="the JSON of GET …/ledger/checkpoint?seq=N: a signed head and entry N's proof",
    )
    cmd.add_argument("--public-key", metavar="PEM", help="the operator's checkpoint public key")
    _add_fork_options(cmd)
    cmd.set_defaults(run=_verify_receipt)


def register(sub: Any) -> None:
    """Add ``verify-organisation``, ``verify``, ``witness-keygen`` and ``verify-receipt`` to the
    ``odometer`` command line (the core's ``odometer.commands`` plug-in)."""
    _add_verify_organisation(sub)
    _add_verify(sub)
    _add_receipts(sub)
