"""The type of a JSON object whose shape is not the app's to say (:data:`JSONObject`), in the
lowest floor that uses it, importing nothing of the app, so that every module may name it."""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["JSONObject"]

#: A JSON object whose shape is not the app's to say, passed through as its writer made it:
#: a wire model's field (a pydantic annotation is the field's schema and its validator, so a
#: field the OpenAPI document declares as a free ``object`` stays one), a route's answer from
#: a use case that says no more, an error's own fields, the mode's own part of a status. The
#: JSON the accounting core writes is typed where it is built, by the TypedDicts of
#: ``odometer_core.accounting.json_types`` (a summary, a reading, a ledger entry and its
#: parts, a stored partition …), and what the app builds and reads itself is a TypedDict or
#: a model (such as ``app/services/_types.py``'s); a JSON schema being finished is pydantic's
#: ``JsonSchemaValue``.
JSONObject: TypeAlias = dict[str, Any]
