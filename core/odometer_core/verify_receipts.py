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

Both take ``--cosigner VKEY`` (repeatable: a witness's verifier key, text or file) and report,
for every head, which of those witnesses cosigned it (``SEEN``), whose line does not verify
(``NOT VERIFIED``: never counted) and who did not sign (``ABSENT``); and ``--forks FILE`` (the
answer of ``GET …/ledger/forks``; an export carries its own): a receipt or an earlier head
that no longer verifies because the operator acknowledged a loss is reported ``FORKED``,
naming the acknowledgement (who, when, which entries), with exit code 3; a failure no
acknowledgement explains stays ``FAILED`` (exit 1); ``docs/ledger.md``, *Forks and
acknowledged losses*.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odometer_core.ledger.cosign import (
    Fork,
    export_forks,
    head_forks,
    proven_forks,
    receipt_fork,
)
from odometer_core.ledger.merkle import Frontier
from odometer_core.ledger.notes import NoteError, NoteVerifier
from odometer_core.ledger.receipts import (
    Receipt,
    ReceiptError,
    SignedHead,
    check_extends,
    check_receipt,
    decode_proof,
    open_head,
    open_receipt,
)

#: the exit code of a receipt or head that a fork the operator acknowledged explains
FORKED = 3

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


def cosigners(values: list[str] | None, command: str) -> tuple[NoteVerifier, ...]:
    """``--cosigner``: witnesses' verifier keys (``name+ID+base64``), each given as text or as
    a file holding it."""
    out = []
    for value in values or ():
        text = value
        if "+" not in value or Path(value).is_file():
            text = _read(value, command).strip()
        try:
            out.append(NoteVerifier.from_vkey(text))
        except NoteError as exc:
            raise SystemExit(f"odometer {command}: --cosigner {value}: {exc}") from None
    return tuple(out)


def say_witnesses(head: SignedHead, where: str) -> None:
    """One line per cosigner asked about: what it says of ``head``."""
    for seen in head.witnesses:
        key = f"{seen.name}+{seen.key_id:08x}"
        if seen.status == "verified":
            print(
                f"SEEN: the head of size {head.size} in {where} is cosigned by witness {key} "
                f"(time {seen.time})",
                file=sys.stderr,
            )
        elif seen.status == "invalid":
            print(
                f"NOT VERIFIED: the cosignature of witness {key} on the head in {where} does "
                "not verify: not counted",
                file=sys.stderr,
            )
        else:
            print(f"ABSENT: witness {key} did not cosign the head in {where}", file=sys.stderr)


def short_of_quorum(head: SignedHead, quorum: int, where: str) -> str | None:
    """Why ``head`` fails ``--quorum`` (fewer of the named witnesses cosigned it), or
    ``None``."""
    if len(head.seen_by) >= quorum:
        return None
    return (
        f"the head of size {head.size} in {where} is cosigned by {len(head.seen_by)} of the "
        f"witnesses given, fewer than --quorum {quorum}"
    )


def witnesses_json(head: SignedHead) -> list[dict[str, Any]]:
    return [w.to_json() for w in head.witnesses]


def load_forks(path: str | None, key: Ed25519PublicKey, command: str) -> list[Fork]:
    """``--forks FILE``: the acknowledgements of ``GET …/ledger/forks``, each proven in the
    operator's signed head there."""
    if path is None:
        return []
    try:
        return proven_forks(json.loads(_read(path, command)), key)
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"odometer {command}: FAILED: {path}: {exc}") from None


def load_head(
    path: str,
    key: Ed25519PublicKey,
    command: str,
    witnesses: tuple[NoteVerifier, ...] = (),
) -> tuple[SignedHead, Any]:
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
        return open_head(note, key, witnesses), doc
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
    witnesses = cosigners(args.cosigner, "verify-receipt")
    head, doc = load_head(args.head, key, "verify-receipt", witnesses)
    say_witnesses(head, args.head)
    short = short_of_quorum(head, args.quorum, args.head)
    if short is not None:
        print(f"FAILED: {short}", file=sys.stderr)
        return 1
    forks = load_forks(args.forks, key, "verify-receipt")
    inclusion = (doc or {}).get("inclusion") or {}
    receipts = [r for r in _receipts(_read(args.receipts, "verify-receipt"))]
    mine = [r for r in receipts if r.dataset_id == head.dataset_id]
    if not mine:
        raise SystemExit(
            f"odometer verify-receipt: no receipt of dataset {head.dataset_id} in {args.receipts}"
        )
    failed = checked = forked = 0
    for receipt in mine:
        where = f"entry {receipt.seq} of {receipt.dataset_id}"
        try:
            open_receipt(receipt, key)
        except ReceiptError as exc:
            failed += 1
            print(f"FAILED: {where}: {exc}", file=sys.stderr)
            continue
        fork = receipt_fork(receipt.seq, receipt.at, forks)
        if inclusion.get("seq") != receipt.seq:
            if fork is not None:
                forked += 1
                print(f"FORKED: {where}: {fork.says()}", file=sys.stderr)
                continue
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
            if fork is not None:
                forked += 1
                print(f"FORKED: {where}: {fork.says()} (the head says: {exc})", file=sys.stderr)
                continue
            failed += 1
            print(f"FAILED: {where}: {exc}", file=sys.stderr)
            continue
        print(
            f"VERIFIED: entry {receipt.seq} ({receipt.entry_hash[:16]}…) of {receipt.dataset_id}"
            f" is in the signed head of size {head.size}, signed by {', '.join(head.signed_by)}",
            file=sys.stderr,
        )
    if failed or not (checked or forked):
        return 1
    return FORKED if forked else 0


def _export_hashes(entries: Iterable[dict[str, Any]], size: int) -> Frontier:
    frontier = Frontier()
    for entry in entries:
        if frontier.size == size:
            break
        frontier.append_entry(entry["hash"])
    return frontier


@dataclass
class Since:
    """What ``--since OLD`` found: its problems (none when the newer tree extends the head
    held earlier), the acknowledged forks that explain them, and the heads read."""

    problems: list[str] = field(default_factory=list)
    forks: list[Fork] = field(default_factory=list)
    heads: dict[str, SignedHead] = field(default_factory=dict)

    def to_json(self, path: str) -> dict[str, Any]:
        return {
            "head": path,
            "extends": not self.problems,
            "forked": [f.to_json() for f in self.forks],
            "witnesses": {name: witnesses_json(h) for name, h in self.heads.items()},
        }


def since(
    args: argparse.Namespace,
    key: Ed25519PublicKey,
    entries: Iterable[dict[str, Any]] | None,
) -> Since:
    """``--since OLD``: the export's (or the newer head's) tree must extend the head held
    earlier; when it does not, the acknowledged forks (the export's own, or ``--forks``)
    that explain it."""
    witnesses = cosigners(getattr(args, "cosigner", None), "verify")
    old, _ = load_head(args.since, key, "verify", witnesses)
    out = Since(heads={args.since: old})
    quorum = getattr(args, "quorum", 0)
    short = short_of_quorum(old, quorum, args.since)
    if short is not None:
        out.problems.append(short)
        return out
    forks = load_forks(getattr(args, "forks", None), key, "verify")
    if entries is not None:
        frontier = _export_hashes(entries, old.size)
        if frontier.size < old.size:
            out.problems.append(
                f"the export holds {frontier.size} entries, fewer than the {old.size} of the "
                "head held earlier (--since): entries were dropped"
            )
        elif frontier.root() != old.root:
            out.problems.append(
                f"the export's first {old.size} entries are not the tree of the head held "
                "earlier (--since): the ledger was rewritten at or before its entry "
                f"{old.size}"
            )
        if out.problems:
            try:
                forks = [*forks, *export_forks(entries)]
            except (ValueError, KeyError, TypeError) as exc:
                out.problems.append(f"an acknowledgement in the export: {exc}")
                return out
            out.forks = head_forks(old.size, old.root, forks)
        return out
    if args.head is None or args.consistency is None:
        raise SystemExit(
            "odometer verify: --since without an export needs --head and --consistency"
        )
    new, _ = load_head(args.head, key, "verify", witnesses)
    out.heads[args.head] = new
    short = short_of_quorum(new, quorum, args.head)
    if short is not None:
        out.problems.append(short)
        return out
    try:
        doc = json.loads(_read(args.consistency, "verify"))
        proof = decode_proof(doc["proof"] if isinstance(doc, dict) else doc)
        check_extends(old, new, proof)
    except (ValueError, KeyError, TypeError) as exc:
        out.problems.append(str(exc))
        out.forks = head_forks(old.size, old.root, forks)
    return out


def say_since(found: Since) -> None:
    for path, head in found.heads.items():
        say_witnesses(head, path)


def verify_since_only(args: argparse.Namespace) -> int:
    key = _key(args.public_key, "verify")
    found = since(args, key, None)
    say_since(found)
    if found.problems and found.forks:
        for fork in found.forks:
            print(f"FORKED: the head held in {args.since}: {fork.says()}", file=sys.stderr)
        print(f"(the check says: {found.problems[0]})", file=sys.stderr)
        return FORKED
    if found.problems:
        print(f"FAILED: {found.problems[0]}", file=sys.stderr)
        return 1
    print(
        f"VERIFIED: the signed head in {args.head} extends the one held in {args.since}",
        file=sys.stderr,
    )
    return 0


def witness_keygen(args: argparse.Namespace) -> int:
    """A new witness key: its signer key text written to ``--out`` (mode 0600, never
    overwritten), its verifier key (cosignature v1) printed for those who check its
    cosignatures."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from odometer_core.ledger.notes import COSIGNATURE_V1, NoteSigner

    try:
        signer = NoteSigner(args.name, Ed25519PrivateKey.generate(), COSIGNATURE_V1)
    except NoteError as exc:
        raise SystemExit(f"odometer witness-keygen: {exc}") from None
    out = Path(args.out)
    try:
        with out.open("x", encoding="ascii") as stream:
            out.chmod(0o600)
            stream.write(signer.skey() + "\n")
    except OSError as exc:
        raise SystemExit(f"odometer witness-keygen: cannot write {out}: {exc}") from None
    print(signer.verifier.vkey())
    return 0
