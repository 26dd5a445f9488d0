"""What a declaration helper returns: :class:`Mechanism`, a declaration's fields as Python
values, and how the helpers read the numbers they are given (:func:`exact`).

The helpers themselves are :mod:`odometer_client.declarations` (generated ones in
:mod:`odometer_client._declared`, from the server's document).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from odometer_client.shapes import Declaration

Number = Decimal | int | float | str


class Mechanism:
    """A declaration for the server to judge: ``type`` and its fields, read as attributes
    (``d.dp_sgd(1.1, 0.01, epochs=3).steps == 300``); :meth:`to_json` is what is sent."""

    __slots__ = ("_fields",)

    def __init__(self, **fields: Any) -> None:
        object.__setattr__(self, "_fields", {k: v for k, v in fields.items() if v is not None})

    def __getattr__(self, name: str) -> Any:
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a declaration is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mechanism) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"Mechanism({inner})"

    @property
    def type(self) -> str:
        return str(self._fields["type"])

    def to_json(self) -> Declaration:
        """The declaration as the server reads it (amounts as decimal strings)."""
        return {k: _json(v) for k, v in self._fields.items()}


def _json(value: Any) -> Any:
    if isinstance(value, Mechanism):
        return value.to_json()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value


#: Decimal text as the server reads it (docs/http-api.md, *Numbers*), a sign allowed so that
#: a negative amount is refused by its domain, naming it; ``Decimal`` alone also reads
#: ``"1_0"`` as 10, ``" 1"``, other scripts' digits and ``"NaN"``.
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def exact(value: Number) -> Decimal:
    """``value`` as an exact decimal: a ``float`` through its ``repr`` (as the server reads a
    JSON number), text only if it is decimal text; otherwise a ``ValueError``."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return Decimal(repr(value))
    if isinstance(value, str) and _DECIMAL_TEXT.fullmatch(value) is None:
        raise ValueError(
            f"not decimal text (ASCII digits with an optional fraction and exponent, such as "
            f"1, 0.5 or 1e-6): {value!r}"
        )
    return value if isinstance(value, Decimal) else Decimal(str(value))


def exact_all(values: Iterable[Number]) -> list[Decimal]:
    """Each of ``values`` read by :func:`exact`."""
    return [exact(v) for v in values]


def one_of(kind: str, name: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a ``ValueError`` saying which they are."""
    if value not in choices:
        words = " or ".join(repr(c) for c in choices)
        raise ValueError(f"{kind}: {name} is {words}, got {value!r}")
    return value
