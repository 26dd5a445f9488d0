"""``odometer``: the command line of the service, for curators and auditors.

    odometer datasets create NAME --epsilon E --delta D [--mode M | --accounting JSON]
                             [--partition JSON]
    odometer datasets list | odometer datasets show DATASET
    odometer blocks list DATASET [--from KEY] [--to KEY] [--limit N]
    odometer blocks open DATASET FROM TO | odometer blocks retire DATASET FROM TO
    odometer register DATASET --mechanism JSON [--blocks SPEC] [--sub-budget NAME]
    odometer preview DATASET --mechanism JSON [--blocks SPEC] [--sub-budget NAME]
    odometer budget set DATASET --epsilon E --delta D [--sub-budget NAME]
    odometer grant DATASET PRINCIPAL [--quota-epsilon E --quota-delta D]
    odometer grants list DATASET | odometer grants revoke DATASET PRINCIPAL
    odometer orgs list | create NAME | report ORG
    odometer orgs cap ORG (--epsilon E --delta D [--mode M | --accounting JSON] | --remove)
    odometer orgs capacity ORG --mechanism JSON [--dataset DATASET]
    odometer principals list | create NAME --role ROLE [--organisation ORG]
    odometer keys issue PRINCIPAL [--expires-at T] | odometer keys revoke KEY_ID
    odometer export DATASET -o FILE [--format jsonl|csv|json]
    odometer report DATASET

Every command takes ``--url`` (``$ODOMETER_URL``), ``--key`` (``$ODOMETER_API_KEY``),
``--json`` (machine-readable output) and ``--exact`` (amounts in full; by default at most 8
significant digits), before or after the subcommand (the subcommand's wins). ``DATASET`` is an
id or an exact name. ``odometer verify FILE`` (offline) reads every export. Every error is one
line on stderr beginning ``error: `` that says what to do, never a traceback.

The commands live in ``odometer_client._cli``: ``run`` (connection, errors, names),
``options`` (what the command line reads itself), ``output`` (tables and amounts), and the
commands by subject: ``datasets`` (with blocks and budgets), ``invocations``, ``tenancy``
(grants, organisations, principals, keys) and ``reports`` (export, report).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, NoReturn, TextIO, cast

from odometer_client._cli import datasets, invocations, receipts, reports, tenancy, witness
from odometer_client._cli.run import common_options

__all__ = ["PLUGIN_GROUP", "main", "register"]


def register(sub: Any) -> None:
    """Add the client subcommands to the ``odometer`` parser's subparsers."""
    common = common_options()
    for commands in (datasets, invocations, tenancy, reports, witness, receipts):
        commands.add_commands(sub, common)


# ---------------------------------------------------------------------------- the command line
#: Entry-point group of commands other distributions add: ``verify`` (privacy-odometer-core)
#: and the operator commands (the server).
PLUGIN_GROUP = "odometer.commands"


def _verify_missing(args: argparse.Namespace) -> int:
    sys.stderr.write(
        "odometer verify: the offline verifier is not installed: "
        "pip install ./client ./core from a checkout of the repository "
        "(privacy-odometer-core is on no package index)\n"
    )
    return 2


def _add_plugins(sub: Any) -> None:
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            entry.load()(sub)
        except Exception as exc:  # a broken plug-in must not take the client commands down
            sys.stderr.write(f"odometer: commands of {entry.value} unavailable: {exc}\n")
    if "verify" not in sub.choices:
        missing = sub.add_parser(
            "verify", help="replay a ledger export (needs privacy-odometer-core)"
        )
        missing.add_argument("args", nargs=argparse.REMAINDER)
        missing.set_defaults(run=_verify_missing)
        return


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, as every error (the full usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


class _ReaderGone(BaseException):
    """The reader of stdout went away (``odometer … | head -1``). Not an ``OSError``: no
    ``except OSError`` on the way (the verifier's "cannot read FILE") takes it for another."""


class _Stdout:
    """``sys.stdout`` while a command runs: a broken pipe is :class:`_ReaderGone`."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise _ReaderGone from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise _ReaderGone from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _quiet_broken_pipe() -> int:
    """No traceback and nothing more written: stdout now goes nowhere, so the interpreter's
    last flush cannot fail either."""
    with suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141  # 128 + SIGPIPE: what a shell reports of a writer the pipe stopped


def main(argv: Sequence[str] | None = None) -> int:
    """``odometer``: the client commands and every installed plug-in's."""
    parser = _Parser(prog="odometer", description="Command line of the privacy odometer service.")
    parser.add_argument(
        "--url", dest="url_before", metavar="URL", help="server URL, for every command"
    )
    parser.add_argument(
        "--key", dest="key_before", metavar="KEY", help="API key, for every command"
    )
    parser.add_argument(
        "--json", dest="json_before", action="store_true", help="machine-readable JSON output"
    )
    parser.add_argument("--exact", dest="exact_before", action="store_true", help="amounts in full")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(sub)
    _add_plugins(sub)
    stdout = sys.stdout
    sys.stdout = cast(TextIO, _Stdout(stdout))
    try:
        try:
            args = parser.parse_args(argv)
            # given before the subcommand and after it: the subcommand's (the later) wins
            if getattr(args, "url", None) is None and hasattr(args, "url"):
                args.url = args.url_before
            if getattr(args, "key", None) is None and hasattr(args, "key"):
                args.key = args.key_before
            if hasattr(args, "json"):
                args.json = args.json or args.json_before
            if hasattr(args, "exact"):
                args.exact = args.exact or args.exact_before
            code: int = args.run(args)
        finally:  # also after --help and usage errors (SystemExit): all written, or none
            sys.stdout.flush()
    except (_ReaderGone, BrokenPipeError):
        sys.stdout = stdout
        return _quiet_broken_pipe()
    finally:
        sys.stdout = stdout
    return code


if __name__ == "__main__":
    raise SystemExit(main())
