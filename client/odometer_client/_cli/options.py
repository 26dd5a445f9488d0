"""The options the command line reads itself before sending anything: the JSON options
(``--accounting``, ``--partition``, ``--mechanism``), ``--blocks`` and the accounting options
of ``datasets create`` and ``orgs cap``. A bad one is a :class:`UsageError` (exit status 2)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from odometer_client._core import BlocksLike
from odometer_client.errors import OdometerError


class UsageError(OdometerError):
    """The command line itself is wrong (exit status 2, as argparse's usage errors)."""


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def json_object(text: str, option: str, example: str) -> dict[str, Any]:
    """A JSON object given on the command line; anything else is a :class:`UsageError` naming
    the option, what is wrong and an example."""
    hint = f"give a JSON object in single quotes, e.g. '{example}'"
    try:
        parsed = json.loads(text, parse_constant=_not_json_constant)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise UsageError(f"{option} is not JSON: {exc.msg} at {where}: {hint}") from None
    except RecursionError:
        raise UsageError(f"{option} is not JSON: nested too deeply: {hint}") from None
    except ValueError as exc:  # NaN, Infinity; an integer of more than 4300 digits
        raise UsageError(f"{option} is not JSON: {exc}: {hint}") from None
    if not isinstance(parsed, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        got = kind.get(type(parsed), "a number")
        raise UsageError(f"{option} must be a JSON object, not {got}: {hint}")
    return parsed


#: The options taking a JSON object: what their error suggests.
JSON_OPTIONS = {
    "accounting": '{"mode": "zcdp"}',
    "partition": '{"kind": "day", "unit": "record"}',
    "mechanism": '{"type": "pure_dp", "epsilon": "0.4"}',
}

BLOCKS_FORMS = "FROM..TO, KEY[,KEY…] (ranges too: A..B,C), all, or a JSON object"


def read_options(args: argparse.Namespace) -> None:
    """The JSON options (and ``--blocks``) read in place, before anything is sent: a bad one
    is one error line, exit status 2."""
    for name, example in JSON_OPTIONS.items():
        text = getattr(args, name, None)
        if isinstance(text, str):
            setattr(args, name, json_object(text, f"--{name}", example))
    blocks = getattr(args, "blocks", None)
    if isinstance(blocks, str):
        args.blocks = blocks_option(blocks)


def blocks_option(text: str) -> BlocksLike:
    """``--blocks``: ``FROM..TO``; keys ``A,B,C``; ranges and keys
    ``A..B,C..D,E``; ``all``; or the selection as JSON (``{"keys": [...]}``, …). Keys are sent
    as written."""
    text = text.strip()
    if text == "all":
        return "all"
    if text.startswith(("{", "[", '"')):
        return json_object(text, "--blocks", '{"keys": ["2026-11-01", "2026-11-03"]}')
    ranges: list[tuple[str, str]] = []
    for piece in text.split(","):
        ends = [end.strip() for end in piece.split("..")]
        if len(ends) > 2 or not all(ends):
            raise UsageError(f"--blocks: cannot read {text!r}: give {BLOCKS_FORMS}")
        ranges.append((ends[0], ends[-1]))
    if len(ranges) == 1 and ".." in text:
        return {"from": ranges[0][0], "to": ranges[0][1]}
    if ".." not in text:
        return {"keys": [first for first, _ in ranges]}
    return {"ranges": [{"from": first, "to": last} for first, last in ranges]}


def accounting_options(parser: argparse.ArgumentParser, example: str) -> None:
    """The accounting options (read by :func:`accounting`): ``datasets create``, ``orgs cap``."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--mode", choices=["basic", "zcdp", "rdp", "gdp"])
    mode.add_argument("--accounting", help=f"full accounting JSON, e.g. '{example}'")
    parser.add_argument(
        "--final-conversion-delta", help="δ of the final conversion to (ε, δ) (zcdp, rdp)"
    )


def accounting(args: argparse.Namespace) -> dict[str, Any] | None:
    """The accounting of :func:`accounting_options`: ``--accounting`` (in full) or
    ``--mode``, with ``--final-conversion-delta`` if given; ``None``: the server's default."""
    chosen: dict[str, Any] | None = None
    if args.accounting is not None:
        chosen = dict(args.accounting)
    elif args.mode:
        chosen = {"mode": args.mode}
    if args.final_conversion_delta is not None:
        if chosen is None:
            raise OdometerError("--final-conversion-delta needs --mode zcdp or rdp")
        chosen["final_conversion_delta"] = args.final_conversion_delta
    return chosen
