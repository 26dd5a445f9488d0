"""The client's generated files, committed so that neither its users nor its build need the
tools that make them:

- ``odometer_client/_sync/client.py``, the synchronous client, generated from the asynchronous
  one (``_async/client.py``) by unasync: one source for both;
- ``odometer_client/contract.json``, the request and response schemas of the server's committed
  OpenAPI document (``openapi/openapi.json``);
- ``odometer_client/_declared.py``, one declaration helper per kind of that document's
  ``Mechanism`` union (whose schemas the server builds from the accounting core's field
  table, ``odometer_core.accounting.kinds.fields``): the kind's fields as its parameters,
  required ones first, each read as the server reads it (amounts as exact decimals).

    python client/generate.py          # rewrite the three
    python client/generate.py --check  # exit 1 if any committed file is stale
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import unasync

PACKAGE = Path(__file__).resolve().parent / "odometer_client"


def _contract() -> Any:
    """``odometer_client.contract``, loaded from its file: not through the package, which imports
    the helpers generated here (so that a stale or missing ``_declared.py`` can be rewritten)."""
    spec = importlib.util.spec_from_file_location("_contract", PACKAGE / "contract.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CONTRACT = _contract()
MECHANISM: str = _CONTRACT.MECHANISM
extract = _CONTRACT.extract
OPENAPI = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"
CONTRACT = PACKAGE / "contract.json"
DECLARED = PACKAGE / "_declared.py"
SOURCE = PACKAGE / "_async" / "client.py"
TARGET = PACKAGE / "_sync" / "client.py"
HEADER = (
    "# Generated from odometer_client/_async/client.py by client/generate.py (unasync):\n"
    "# do not edit; edit the asynchronous source and run `make client-generated`.\n"
)
REPLACEMENTS = {
    "AsyncOdometerClient": "OdometerClient",
    "AsyncReservation": "Reservation",
    "AsyncClient": "Client",
    "AsyncBaseTransport": "BaseTransport",
    "aclose": "close",
    "asleep": "sleep",
    "aiter_bytes": "iter_bytes",
    "aread": "read",
}


def generated_contract() -> str:
    """``contract.json`` as extracted from the committed OpenAPI document now."""
    document = extract(json.loads(OPENAPI.read_text("utf-8")))
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


_DECLARED_HEADER = '''\
# Generated from the server's OpenAPI document (openapi/openapi.json) by client/generate.py:
# do not edit; a kind's fields are said once, in the accounting core's field table.
"""One declaration helper per kind of the server's document: the kind's fields as parameters
(required ones first, in the document's order; optional ones default to absent), amounts read
as exact decimals (:func:`~odometer_client._mechanism.exact`). The public helpers are
:mod:`odometer_client.declarations`, which adds friendlier ones for some kinds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from odometer_client._mechanism import Mechanism, Number, exact, exact_all, one_of
'''

#: A field's shape in the document: its Python type and how a value is read ("{}": the value).
_SHAPES = {
    "amount": ("Number", "exact({})"),
    "amounts": ("Sequence[Number]", "exact_all({})"),
    "integer": ("int", "{}"),
    "integers": ("Sequence[int]", "list({})"),
    "boolean": ("bool", "{}"),
    "text": ("str", "{}"),
    "cells": ("Sequence[Mapping[str, Any]]", "[_cell(c) for c in {}]"),
    "mechanism": ("Mechanism", "{}"),
    "mechanisms": ("Sequence[Mechanism]", "list({})"),
}


#: An ODP cell's schema in the document (``cells``' items): :func:`_cell` reads one.
CELL = "OdpCell"


def _shape(prop: Mapping[str, Any], cell: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """A property's shape (a key of :data:`_SHAPES`, or "choice") and the words that say it
    (``cell``: the document's :data:`CELL` schema, whose fields a list of cells names)."""
    if "oneOf" in prop:
        return "mechanism", "a mechanism"
    if prop.get("type") == "array":
        item, words = _shape(prop["items"])
        if item == "mechanism":
            return "mechanisms", f"1 to {prop['maxItems']} mechanisms"
        if item == "cell":
            names = ", ".join(cell["properties"]) if cell is not None else "…"
            return "cells", f"1 to {prop['maxItems']} cells {{{names}}}"
        return f"{item}s", f"1 to {prop['maxItems']} values, each {words}"
    if "anyOf" in prop:  # a JSON number or decimal text in the domain the description says
        return "amount", prop["description"].split(": an exact decimal")[0]
    if prop.get("type") == "integer":
        return "integer", f"an integer in [{prop['minimum']:.0f}, {prop['maximum']:.0f}]"
    if prop.get("type") == "boolean":
        return "boolean", "true or false"
    if "enum" in prop:
        return "choice", " or ".join(repr(c) for c in prop["enum"])
    if prop.get("type") == "string":
        return "text", f"text matching {prop['pattern']}" if "pattern" in prop else "text"
    if prop.get("$ref", "").endswith(f"/{CELL}"):
        return "cell", "a cell"
    raise ValueError(f"no helper parameter for the schema {prop!r}")


def _cell(schema: Mapping[str, Any]) -> str:
    """The source of ``_cell``, which reads one ODP cell as the server does (its amounts as
    exact decimals), from the cell's schema in the document: its fields, required ones as
    given (a missing one is a ``KeyError``), optional ones when present; no other."""
    required = set(schema.get("required", ()))
    given, optional = [], []
    for name, prop in schema["properties"].items():
        read = _SHAPES[_shape(prop)[0]][1].format(f'cell["{name}"]')
        if name in required:
            given.append(f'"{name}": {read}')
        else:
            optional.append(f'    if "{name}" in cell:\n        out["{name}"] = {read}\n')
    names = ", ".join(schema["properties"])
    head = (
        "def _cell(cell: Mapping[str, Any]) -> dict[str, Any]:\n"
        f'    """One ODP cell {{{names}}}, as the server reads it."""\n'
    )
    if not optional:
        return head + f"    return {{{', '.join(given)}}}\n"
    out = f"    out: dict[str, Any] = {{{', '.join(given)}}}\n"
    return head + out + "".join(optional) + "    return out\n"


def _helper(kind: str, schema: Mapping[str, Any], cell: Mapping[str, Any] | None = None) -> str:
    """The source of ``kind``'s helper, from its schema in the document (``cell``: the
    document's ODP cell, which a kind's ``cells`` hold)."""
    required = set(schema.get("required", ()))
    fields = [(name, prop) for name, prop in schema["properties"].items() if name != "type"]
    fields.sort(key=lambda item: item[0] not in required)  # stable: the document's order
    params, values, lines = [], [f'type="{kind}"'], []
    for name, prop in fields:
        shape, words = _shape(prop, cell)
        if shape == "choice":
            choices = tuple(prop["enum"])
            annotation, read = "str", f'one_of("{kind}", "{name}", {{}}, {choices!r})'
        else:
            annotation, read = _SHAPES[shape]
        said = prop.get("description") if shape != "amount" else None  # an amount's: its domain
        optional = "" if name in required else " (optional)"
        lines.append(f"    - ``{name}``: {said or words}{optional}")
        if name in required:
            params.append(f"{name}: {annotation}")
            values.append(f"{name}={read.format(name)}")
        elif read == "{}":  # absent stays absent (Mechanism drops None)
            params.append(f"{name}: {annotation} | None = None")
            values.append(f"{name}={name}")
        else:
            params.append(f"{name}: {annotation} | None = None")
            values.append(f"{name}=None if {name} is None else {read.format(name)}")
    doc = schema.get("description", kind).replace("\\", "\\\\").replace('"""', "'''")
    doc = doc.replace("\n", "\n    ").replace("\n    \n", "\n\n")
    return (
        f"def {kind}({', '.join(params)}) -> Mechanism:\n"
        f'    """{doc}\n\n' + "\n".join(lines) + '\n    """\n'
        f"    return Mechanism({', '.join(values)})\n"
    )


def generated_declared(openapi: Mapping[str, Any] | None = None) -> str:
    """``_declared.py`` as generated from ``openapi`` (the committed document if not given)."""
    document = extract(openapi or json.loads(OPENAPI.read_text("utf-8")))["schemas"]
    union = document[MECHANISM]
    cell = document.get(CELL)
    helpers = [] if cell is None else [_cell(cell)]
    for kind, ref in union["discriminator"]["mapping"].items():
        helpers.append(_helper(kind, document[ref.rsplit("/", 1)[-1]], cell))
    return _format(DECLARED, _DECLARED_HEADER + "\n\n" + "\n\n".join(helpers))


def _format(target: Path, text: str) -> str:
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(target), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return formatted.stdout


def generated_sync() -> str:
    """The synchronous client's text, as generated from the asynchronous source now."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "_async" / "client.py"
        source.parent.mkdir()
        source.write_text(SOURCE.read_text("utf-8"), "utf-8")
        rule = unasync.Rule("/_async/", "/_sync/", additional_replacements=REPLACEMENTS)
        unasync.unasync_files([str(source)], [rule])
        text = (Path(tmp) / "_sync" / "client.py").read_text("utf-8")
    # shorter names can put a call on one line again: format as the rest of the code is
    return _format(TARGET, HEADER + text)


def main(argv: list[str]) -> int:
    files = {
        TARGET: generated_sync(),
        CONTRACT: generated_contract(),
        DECLARED: generated_declared(),
    }
    if "--check" in argv:
        stale = [path.name for path, text in files.items() if path.read_text("utf-8") != text]
        for name in stale:
            print(f"{name} is stale: run `make client-generated`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
