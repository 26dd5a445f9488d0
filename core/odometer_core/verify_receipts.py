"""``odometer verify-receipt`` and ``odometer verify --since``: the checks an analyst holding
receipts and an auditor holding an earlier signed head make offline, with the operator's
public key alone (:mod:`odometer_core.ledger.receipts`; ``docs/ledger.md``).

odometer verify-receipt RECEIPTS --head HEAD.json --public-key PEM
    each receipt in RECEIPTS (a receipt's JSON, or JSON lines as ``odometer receipts --json``
    prints them) of the head's dataset is checked against the later signed head in HEAD.json
    (the answer of ``GET …/ledger/checkpoint?seq=N``: its note and N's inclusion proof;
    receipts of other entries need their own)
odometer verify --since OLD [EXPORT | --head NEW.json --consistency PROOF.json] --public-key PEM
    the signed head OLD (a note, or the JSON of ``GET …/ledger/checkpoint``) held earlier is a
    prefix of the export's tree (``O(n)``), or of the signed head NEW by the consistency proof
    (``GET …/ledger/consistency?from=OLD&to=NEW``: ``O(log n)`` hashes)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odometer_core.ledger.merkle import Frontier
from odometer_core.ledger.receipts import (
    Receipt,
    ReceiptError,
    SignedHead,
    check_extends,
    check_receipt,
    decode_proof,
    open_head,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def _key(path: str | None, command: str) -> Ed25519PublicKey:
    from odometer_core.ledger.checkpoints import load_public_key

    if path is None:
        raise SystemExit(f"odometer {command}: --public-key PEM is needed (the operator's key)")
    try:
        return load_public_key(Path(path).read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise SystemExit(f"odometer {command}: cannot read the key {path}: {exc}") from None


def _read(path: str, command: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"odometer {command}: cannot read {path}: {exc}") from None


def load_head(path: str, key: Ed25519PublicKey, command: str) -> tuple[SignedHead, Any]:
    """A signed head from a file: a bare note, or the JSON of ``…/ledger/checkpoint`` (and that
    JSON, for its inclusion proof)."""
    text = _read(path, command)
    doc: Any = None
    note = text
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
            note = doc["note"]
        except (ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"odometer {command}: {path} is not a signed head: {exc}") from None
    try:
        return open_head(note, key), doc
    except ReceiptError as exc:
        raise SystemExit(f"odometer {command}: FAILED: {path}: {exc}") from None


def _receipts(text: str) -> list[Receipt]:
    docs: list[Any] = []
    stripped = text.strip()
    try:
        if stripped.startswith("{") and "\n{" not in stripped:
            docs = [json.loads(stripped)]
        else:
            docs = [json.loads(line) for line in stripped.splitlines() if line.strip()]
        return [Receipt.from_json(d.get("receipt", d)) for d in docs]
    except (ValueError, AttributeError) as exc:
        raise SystemExit(f"odometer verify-receipt: not receipts: {exc}") from None


def verify_receipt(args: argparse.Namespace) -> int:
    key = _key(args.public_key, "verify-receipt")
    head, doc = load_head(args.head, key, "verify-receipt")
    inclusion = (doc or {}).get("inclusion") or {}
    receipts = [r for r in _receipts(_read(args.receipts, "verify-receipt"))]
    mine = [r for r in receipts if r.dataset_id == head.dataset_id]
    if not mine:
        raise SystemExit(
            f"odometer verify-receipt: no receipt of dataset {head.dataset_id} in {args.receipts}"
        )
    failed = 0
    checked = 0
    for receipt in mine:
        if inclusion.get("seq") != receipt.seq:
            print(
                f"SKIPPED: entry {receipt.seq}: {args.head} proves entry {inclusion.get('seq')} "
                f"(fetch …/ledger/checkpoint?seq={receipt.seq})",
                file=sys.stderr,
            )
            continue
        checked += 1
        try:
            check_receipt(receipt, head, decode_proof(inclusion.get("proof") or []), key)
        except ReceiptError as exc:
            failed += 1
            print(f"FAILED: entry {receipt.seq} of {receipt.dataset_id}: {exc}", file=sys.stderr)
            continue
        print(
            f"VERIFIED: entry {receipt.seq} ({receipt.entry_hash[:16]}…) of {receipt.dataset_id}"
            f" is in the signed head of size {head.size}, signed by {', '.join(head.signed_by)}",
            file=sys.stderr,
        )
    if not checked:
        return 1
    return 1 if failed else 0


def _export_hashes(entries: Iterable[dict[str, Any]], size: int) -> Frontier:
    frontier = Frontier()
    for entry in entries:
        if frontier.size == size:
            break
        frontier.append_entry(entry["hash"])
    return frontier


def since(
    args: argparse.Namespace,
    key: Ed25519PublicKey,
    entries: Iterable[dict[str, Any]] | None,
) -> list[str]:
    """The problems of ``--since OLD``: the export's (or the newer head's) tree must extend
    the head held earlier; ``[]`` when it does."""
    old, _ = load_head(args.since, key, "verify")
    if entries is not None:
        frontier = _export_hashes(entries, old.size)
        if frontier.size < old.size:
            return [
                f"the export holds {frontier.size} entries, fewer than the {old.size} of the "
                "head held earlier (--since): entries were dropped"
            ]
        if frontier.root() != old.root:
            return [
                f"the export's first {old.size} entries are not the tree of the head held "
                "earlier (--since): the ledger was rewritten at or before its entry "
                f"{old.size}"
            ]
        return []
    if args.head is None or args.consistency is None:
        raise SystemExit(
            "odometer verify: --since without an export needs --head and --consistency"
        )
    new, _ = load_head(args.head, key, "verify")
    try:
        doc = json.loads(_read(args.consistency, "verify"))
        proof = decode_proof(doc["proof"] if isinstance(doc, dict) else doc)
        check_extends(old, new, proof)
    except (ValueError, KeyError, TypeError) as exc:
        return [str(exc)]
    return []


def add_since_options(verify: argparse.ArgumentParser) -> None:
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


def verify_since_only(args: argparse.Namespace) -> int:
    key = _key(args.public_key, "verify")
    problems = since(args, key, None)
    if problems:
        print(f"FAILED: {problems[0]}", file=sys.stderr)
        return 1
    print(
        f"VERIFIED: the signed head in {args.head} extends the one held in {args.since}",
        file=sys.stderr,
    )
    return 0


def register(sub: Any) -> None:
    """``verify-receipt`` (added to the ``odometer`` command line with ``verify``)."""
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
    cmd.set_defaults(run=verify_receipt)
