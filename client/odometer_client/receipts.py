"""Receipts the client keeps (``docs/client.md``, *Receipts*; ``docs/ledger.md``, *Receipts*).

Every registration answered 201 and every settle or cancel answer carries the signed receipt of
the ledger entry it wrote (dataset, entry ``seq``, entry hash, time, and the operator's signed
note stating them; ``null`` from a server without a checkpoint key). :class:`ReceiptStore` keeps
them: :class:`~odometer_client.OdometerClient` and
:class:`~odometer_client.AsyncOdometerClient` hand it every such answer (``receipts=``, on by
default), ``odometer register`` is one of them, and ``odometer receipts`` lists what it holds.
``odometer verify-receipt`` checks them offline against a later signed head and its inclusion
proof, with the operator's public key alone (privacy-odometer-core).

The store is one JSON line per receipt, ``{"server": URL, "receipt": {…as answered…}}``, in
``receipts.jsonl`` under ``$ODOMETER_DATA_DIR`` (default ``$XDG_DATA_HOME/odometer``, else
``~/.local/share/odometer``), read when the store is used. A receipt is public (it names
hashes, not content): the file needs no secrecy, only keeping. Each receipt is appended in one
``write`` of one line to a file opened for appending, so processes and threads keeping receipts
at once do not interleave them. A store that cannot be written never fails the registration it
comes from: it is a :class:`ReceiptStoreWarning`, as is a store that cannot be read or a line of
it that is not a kept receipt (skipped when listing).
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from odometer_client.shapes import JSONObject

#: The store's file name, under :func:`data_dir`.
STORE_FILE = "receipts.jsonl"


class ReceiptStoreWarning(UserWarning):
    """A receipt was not kept (the store could not be written, or the answer's receipt is not
    one), or a line of the store is not a kept receipt. The call the answer came from stands."""


def data_dir() -> Path:
    """Where the client keeps its data: ``$ODOMETER_DATA_DIR``, else ``$XDG_DATA_HOME/odometer``,
    else ``~/.local/share/odometer``."""
    explicit = os.environ.get("ODOMETER_DATA_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "odometer"


class KeptLine(TypedDict):
    """A store's line: the server that answered and its receipt as answered (kept whole: its
    signed ``note`` is verified as written)."""

    server: str
    receipt: JSONObject


@dataclass(frozen=True, slots=True)
class KeptReceipt:
    """A receipt as the client keeps it: the ``server`` that answered, the receipt's fields,
    and ``raw``, the receipt as answered (its signed ``note`` among them: what ``odometer
    verify-receipt`` reads)."""

    server: str
    dataset_id: str
    seq: int
    entry_hash: str
    at: str
    note: str
    raw: JSONObject

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> KeptReceipt:
        """The receipt of a store's line ``{"server", "receipt"}``; ``ValueError`` if it is not
        one (nothing is verified here: ``odometer verify-receipt`` checks the signature)."""
        receipt = doc.get("receipt")
        server = doc.get("server")
        if not isinstance(receipt, Mapping) or not isinstance(server, str):
            raise ValueError("a kept receipt is {server, receipt}")
        fields = [receipt.get(name) for name in ("dataset_id", "entry_hash", "at", "note")]
        texts = [v for v in fields if isinstance(v, str)]
        seq = receipt.get("seq")
        if len(texts) != len(fields) or not (
            isinstance(seq, int) and not isinstance(seq, bool) and seq >= 1
        ):
            raise ValueError("a receipt names its dataset_id, seq, entry_hash, at and note")
        dataset_id, entry_hash, at, note = texts
        return cls(server, dataset_id, seq, entry_hash, at, note, dict(receipt))

    def to_json(self) -> KeptLine:
        """The store's line for this receipt."""
        return {"server": self.server, "receipt": self.raw}


class ReceiptStore:
    """The receipts a client keeps, one JSON line each in ``path`` (default: ``receipts.jsonl``
    under :func:`data_dir`, as the environment says when the store is used)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._path = None if path is None else Path(path)
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else data_dir() / STORE_FILE

    def keep(self, answer: Mapping[str, Any], server: str) -> KeptReceipt | None:
        """Keep the receipt of ``answer`` (a registration's, a settle's or a cancel's JSON, from
        ``server``): the receipt kept, or ``None`` when the answer carries none or it could not
        be kept (then with a :class:`ReceiptStoreWarning`)."""
        receipt = answer.get("receipt")
        if receipt is None:
            return None
        try:
            kept = KeptReceipt.from_json({"server": server, "receipt": receipt})
        except ValueError as exc:
            warnings.warn(f"the answer's receipt was not kept: {exc}", ReceiptStoreWarning, 2)
            return None
        line = json.dumps(kept.to_json(), sort_keys=True) + "\n"
        path = self.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock, path.open("a", encoding="utf-8") as stream:
                stream.write(line)
        except OSError as exc:
            warnings.warn(
                f"the receipt of entry {kept.seq} of {kept.dataset_id} was not kept "
                f"({path}: {exc.strerror})",
                ReceiptStoreWarning,
                2,
            )
            return None
        return kept

    def held(self, dataset_id: str | None = None) -> list[KeptReceipt]:
        """The receipts kept (of ``dataset_id`` only, when given), oldest first; a line that is
        not a kept receipt is skipped, with a :class:`ReceiptStoreWarning`."""
        path = self.path
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            warnings.warn(f"{path} cannot be read ({exc.strerror})", ReceiptStoreWarning, 2)
            return []
        out = []
        seen: set[str] = set()
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line in seen:
                continue  # a receipt kept twice (an answer replayed under its key) is listed once
            seen.add(line)
            try:
                kept = KeptReceipt.from_json(json.loads(line))
            except (ValueError, AttributeError):
                warnings.warn(
                    f"{path}:{number} is not a kept receipt; skipped", ReceiptStoreWarning, 2
                )
                continue
            if dataset_id is None or kept.dataset_id == dataset_id:
                out.append(kept)
        return out


def store_of(receipts: ReceiptStore | str | os.PathLike[str] | bool) -> ReceiptStore | None:
    """The store a client's ``receipts=`` names: ``True`` the default store, ``False`` none, a
    path a store there, a store itself."""
    if isinstance(receipts, ReceiptStore):
        return receipts
    if isinstance(receipts, bool):
        return ReceiptStore() if receipts else None
    return ReceiptStore(receipts)


__all__ = ["KeptReceipt", "ReceiptStore", "ReceiptStoreWarning", "data_dir", "store_of"]
