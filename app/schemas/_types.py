"""The type of a JSON object whose shape is not the app's to say (:data:`JSONObject`), in the
lowest floor that uses it, importing nothing of the app, so that every module may name it."""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["JSONObject"]

#: A JSON object passed through as its writer made it: the accounting core's JSON (a
#: configuration, a state, a status or its summary, a declaration, a stored partition, a
#: ledger entry's parts, a receipt: ``to_json`` and the like, which the core types so), an
#: error's own fields, what a route answers from a use case that says no more. Each use says
#: whose shape it is. What the app builds and reads itself is a TypedDict or a model instead
#: (such as ``app/services/_types.py``'s); a JSON schema being finished is pydantic's
#: ``JsonSchemaValue``.
JSONObject: TypeAlias = dict[str, Any]
