"""Mechanism declarations as a discriminated union on ``type``, built from the accounting core's
field table (:data:`odometer_core.accounting.kinds.fields.TABLE`).

Each kind's model is made from its entry (:func:`build`): one field per entry of the table,
typed by its shape (an amount documented in its domain, an integer between its bounds, a
boolean, one of a few words, text matching a pattern, a list of these, the ODP cells, whose
model is built the same way from the field's ``cell``, a nested mechanism), optional where the
table says so, and the forms of the kinds whose fields go together. The models give the
OpenAPI document one schema per kind and refuse unknown fields; the accounting core's
``parse_declaration`` (closed registry), which reads the same table, remains the authority on
values and is applied by :func:`to_declaration`. A kind or a field is added in the table, not
here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Final, ForwardRef, Literal, TypeAlias, Union

from pydantic import ConfigDict, Field, StrictBool, create_model
from pydantic.json_schema import JsonSchemaValue

from app.schemas._types import JSONObject
from app.schemas.common import (
    NOT_A_BOOLEAN,
    Form,
    StrictModel,
    amount_in,
    not_null,
    one_form_of,
    optional,
)
from odometer_core.accounting import KINDS, Declaration, parse_declaration
from odometer_core.accounting.declarations import OdpCapable
from odometer_core.accounting.kinds.fields import CELL_NAME_PATTERN, TABLE, KindSpec
from odometer_core.accounting.kinds.fields import Field as Spec

#: The kinds whose cell is decided by the released output (ODP partitions): never composed
#: inside one invocation nor subsampled (the accounting core's rule; the schema says it too).
ODP_KINDS: Final = tuple(kind for kind, cls in KINDS.items() if issubclass(cls, OdpCapable))

#: An ODP cell's name (the settle request's ``cell`` too): the core's one pattern.
CELL_PATTERN: Final = CELL_NAME_PATTERN


def _const(value: str) -> JsonSchemaValue:
    return {"type": "string", "const": value}


def _only_kinds(union: JsonSchemaValue, allowed: tuple[str, ...] | None) -> None:
    """A declaration union (``oneOf`` with its ``type`` discriminator) narrowed to ``allowed``
    (``None``: every kind but the ODP partitions)."""
    mapping = union["discriminator"]["mapping"]
    kept = [k for k in mapping if k not in ODP_KINDS] if allowed is None else allowed
    dropped = {mapping.pop(kind) for kind in list(mapping) if kind not in kept}
    union["oneOf"] = [option for option in union["oneOf"] if option.get("$ref") not in dropped]


def _kind_schema(entry: KindSpec) -> Callable[[JsonSchemaValue], None]:
    """The schema of ``entry``'s model, finished: its nested mechanisms narrowed to the kinds
    they may be, then its forms (exactly one of them, ``type`` in each)."""

    def finish(schema: JsonSchemaValue) -> None:
        for spec in entry.fields:
            if spec.shape == "mechanism":
                union = schema["properties"][spec.name]
                _only_kinds(union["items"] if spec.entries else union, spec.inner)
        forms = []
        for form in entry.forms:
            narrowed: JsonSchemaValue = {form.when[0]: _const(form.when[1])} if form.when else {}
            forms.append(Form(("type", *form.fields), None, **narrowed))
        if forms:
            one_form_of(schema, *forms)

    return finish


def _value_type(spec: Spec) -> Any:
    """The type of one value of ``spec`` (of each entry, for a list)."""
    if spec.shape == "amount":
        assert spec.domain is not None
        return amount_in(spec.domain)
    if spec.shape == "integer":
        assert spec.bounds is not None
        low, high = spec.bounds
        return Annotated[int, Field(ge=low, le=high), NOT_A_BOOLEAN]
    if spec.shape == "boolean":
        return StrictBool
    if spec.shape == "choice":
        return Literal[spec.choices]
    if spec.shape == "text":
        return Annotated[str, Field(pattern=spec.pattern)]
    if spec.shape == "cells":
        assert spec.cell is not None
        return _cell_model(spec.cell)
    return ForwardRef("Mechanism")  # resolved when the union is complete (see build)


def _described(spec: Spec, schema: JsonSchemaValue) -> None:
    if not spec.required:
        not_null(schema)
    if spec.description is not None:
        schema["description"] = spec.description


def _field(spec: Spec) -> tuple[Any, Any]:
    """``spec`` as a model field: its annotation and its ``Field``."""
    annotation = _value_type(spec)
    low = high = None  # a list's sizes (None: not a list)
    if spec.entries is not None:
        annotation = list[annotation]  # type: ignore[valid-type]
        low, high = 1, spec.entries
    if spec.description is not None:

        def described(schema: JsonSchemaValue) -> None:
            _described(spec, schema)

        if spec.required:
            return annotation, Field(json_schema_extra=described, min_length=low, max_length=high)
        return Union[annotation, None], Field(  # noqa: UP007
            None, json_schema_extra=described, min_length=low, max_length=high
        )
    if not spec.required:
        return Union[annotation, None], optional(min_length=low, max_length=high)  # noqa: UP007
    return annotation, ... if high is None else Field(min_length=low, max_length=high)


def _model(entry: KindSpec, *, typed: bool = True) -> type[StrictModel]:
    """``entry``'s request model; ``typed``: with its ``type`` (a kind's, not a cell's)."""
    base: type[StrictModel] = StrictModel
    if entry.forms or any(spec.shape == "mechanism" for spec in entry.fields):
        base = type(
            f"_{entry.title}Base",
            (StrictModel,),
            {"model_config": ConfigDict(json_schema_extra=_kind_schema(entry))},
        )
    fields: dict[str, tuple[Any, Any]] = {"type": (Literal[entry.kind], ...)} if typed else {}
    fields.update((spec.name, _field(spec)) for spec in entry.fields)
    model: type[StrictModel] = create_model(  # type: ignore[call-overload]
        entry.title,
        __base__=base,
        __module__=__name__,
        __doc__=entry.description,
        **fields,
    )
    return model


@cache
def _cell_model(cell: KindSpec) -> type[StrictModel]:
    """The model of an ODP cell (a ``cells`` field's ``cell``, such as the table's
    :data:`~odometer_core.accounting.kinds.fields.CELL`), built once."""
    return _model(cell, typed=False)


def build(table: Mapping[str, KindSpec]) -> tuple[dict[str, type[StrictModel]], Any]:
    """The request model of every kind of ``table`` by ``type``, and their union discriminated
    on ``type`` (what a request's ``mechanism`` is)."""
    models = {kind: _model(entry) for kind, entry in table.items()}
    union: Any = Annotated[Union[tuple(models.values())], Field(discriminator="type")]  # noqa: UP007
    for model in models.values():
        model.model_rebuild(_types_namespace={"Mechanism": union})
    return models, union


#: The request model of every kind, by ``type``, and the request field: their union,
#: discriminated on ``type`` (typed as their base class for the type checker).
if TYPE_CHECKING:
    MODELS: dict[str, type[StrictModel]]
    Mechanism: TypeAlias = StrictModel
else:
    MODELS, Mechanism = build(TABLE)


def to_declaration(mechanism: StrictModel) -> Declaration:
    """Translate a validated request model into the accounting core's declaration (the core
    re-validates values and raises ``DeclarationError`` naming the field)."""
    data: JSONObject = mechanism.model_dump(mode="json", exclude_none=True)
    return parse_declaration(data)
