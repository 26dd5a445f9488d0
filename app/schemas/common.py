"""Shared field types: exact amounts, integers, strict models, the error body."""

from __future__ import annotations

import copy
import math
import re
from decimal import Decimal
from typing import Annotated, Any, Literal, TypeAlias

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainSerializer,
    TypeAdapter,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from app.schemas._types import JSONObject
from app.schemas.summaries import RefusalSummary
from odometer_core.accounting import fmt
from odometer_core.accounting.exact import MAX_INPUT_DIGITS, MIN_EXPONENT, ONE, ZERO, read_amount
from odometer_core.accounting.kinds.fields import (
    ORDER,
    PRIVACY,
    PROBABILITY,
    RATE,
    Domain,
)

#: The smallest nonzero magnitude ``parse_amount`` accepts: 1e-300 (|exponent| ≤ 300).
SMALLEST = float(f"1e{MIN_EXPONENT}")


class JsonNumber(float):
    """A JSON number with a fraction or an exponent, as the request's decoder read it
    (:func:`app.api.jsonbody.decode`): its binary value, and ``text``, the literal the client
    wrote, which the amounts and integers below read exactly (``1e-400`` is not the float 0 it
    rounds to, ``0.10000000000000000001`` not 0.1)."""

    __slots__ = ("text",)
    text: str

    @classmethod
    def of(cls, text: str) -> JsonNumber:
        number = cls(text)
        number.text = text
        return number


#: Decimal text as the server reads it (docs/http-api.md, *Numbers*): ASCII digits with an
#: optional fraction and an optional exponent, no sign but ``+``, nothing around it. Python's
#: ``Decimal`` reads more (``"1_0"``, ``" 1"``, ``"-0"``, other scripts' digits, ``"NaN"``):
#: text is matched here first.
_DECIMAL_TEXT = re.compile(r"\+?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: The same with a ``-`` sign: a negative amount, read so that its field's domain refuses it
#: with what it must be ("must be > 0"); ``-0`` is refused as text (it would be read as 0).
_NEGATIVE_TEXT = re.compile(r"-(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: How the answer names the form expected.
DECIMAL_FORM = (
    "decimal text: ASCII digits with an optional fraction and exponent (such as 1, 0.5 or "
    "1e-6), no sign but +, no spaces"
)
_MAX_TEXT = 64


def _negative(text: str) -> bool:
    """Whether ``text`` is a ``-`` sign and decimal text of a nonzero number."""
    if _NEGATIVE_TEXT.fullmatch(text) is None:
        return False
    return any(c in "123456789" for c in re.split("[eE]", text, maxsplit=1)[0])


def _literal(value: object) -> object:
    """``value`` as the core's reader of amounts takes it (:class:`_Read`): a JSON number's
    literal, or text of the documented grammar; anything else is refused here, saying so."""
    if isinstance(value, JsonNumber):
        return value.text  # the literal, exactly (the JSON grammar: the decoder checked it)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number (NaN and ±Infinity are not numbers here)")
    if isinstance(value, str):
        if len(value) > _MAX_TEXT:
            raise ValueError(f"must be {DECIMAL_FORM}, of at most {_MAX_TEXT} characters")
        if _DECIMAL_TEXT.fullmatch(value) is None and not _negative(value):
            raise ValueError(f"must be {DECIMAL_FORM}, got {value!r}")
    return value


class _Read:
    """How an amount is read: :func:`_literal`, then the core's
    :func:`~odometer_core.accounting.exact.read_amount`, which the validator calls itself (the
    schema hands the core the literal; nothing of the app runs on what the core answers)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        read = core_schema.no_info_before_validator_function(read_amount, handler(source))
        return core_schema.no_info_before_validator_function(_literal, read)


def _within(
    value: Decimal, *, positive: bool, high: Decimal, high_open: bool, what: str
) -> Decimal:
    """``value`` if it is in the domain, else what it must be, in words (``what``: the
    domain, such as "a budget's ε: 0 < ε ≤ 10⁶")."""
    if value < ZERO or (positive and value == ZERO):
        raise ValueError(f"must be {'>' if positive else '≥'} 0 ({what}), got {fmt(value)}")
    if value > high or (high_open and value == high):
        bound = f"< {fmt(high)}" if high_open else f"at most {fmt(high)}"
        raise ValueError(f"must be {bound} ({what}), got {fmt(value)}")
    return value


def _probability(value: Decimal) -> Decimal:
    return _within(value, positive=False, high=ONE, high_open=True, what="a δ: 0 ≤ δ < 1")


# ---------------------------------------------------------------------------- amount domains
def _upto(n: int) -> str:
    """The decimal integers 0 … n (n < 20) as a regular expression."""
    return f"[0-{n}]" if n <= 9 else f"[0-9]|1[0-{n - 10}]"


def _decimal_text(k: int, *, positive: bool, top: bool) -> str:
    """Decimal text for a value in [0, 10^k) ((0, 10^k) if ``positive``; 10^k itself too if
    ``top``) that ``parse_amount`` reads: at most 30 significant digits and a decimal exponent
    far inside ±300. A subset of what the server reads (no sign but ``+``, no whitespace, a
    positive exponent only in scientific notation), so that every string the pattern admits
    is accepted; ``tests/api/test_openapi.py`` draws strings from each pattern to check it."""
    digits, frac = MAX_INPUT_DIGITS, MAX_INPUT_DIGITS - max(k, 1)
    if positive:  # a nonzero digit somewhere
        plain = [rf"0*\.0*[1-9][0-9]{{0,{digits - 1}}}0*"]
        if k > 0:
            plain.insert(0, rf"0*[1-9][0-9]{{0,{k - 1}}}(?:\.[0-9]{{0,{frac}}}0*)?")
    else:
        plain = [rf"0*\.0*[0-9]{{1,{digits}}}0*"]
        plain.insert(0, rf"0*[0-9]{{1,{k}}}(?:\.[0-9]{{0,{frac}}}0*)?" if k > 0 else r"0+\.?")
    exponent = r"-0*[1-9][0-9]?" if k == 0 else rf"-0*[0-9]{{1,2}}|\+?0*(?:{_upto(k - 1)})"
    forms = [
        # plain notation below 10^k, optionally scaled down (e-0 … e-99)
        rf"(?:{'|'.join(plain)})(?:[eE]-0*[0-9]{{1,2}})?",
        # scientific notation d.ddd…e±n below 10^k
        rf"[1-9](?:\.[0-9]{{0,{digits - 1}}})?[eE](?:{exponent})",
    ]
    if top:
        forms.append(rf"0*1{'0' * k}(?:\.0*)?")
        if k > 0:
            forms.append(rf"1(?:\.0*)?[eE]\+?0*{k}")
    return rf"^\+?(?:{'|'.join(forms)})$"


#: An RDP order α in (1, 10⁶] as decimal text (the same subset of what the server reads).
ORDER_TEXT = (
    r"^\+?(?:0*(?:[2-9][0-9]{0,5}|1[0-9]{1,5})(?:\.[0-9]{0,23}0*)?|0*1\.[0-9]{0,23}[1-9]0*"
    r"|[1-9](?:\.[0-9]{0,29})?[eE]\+?0*[1-5]|0*1000000(?:\.0*)?|1(?:\.0*)?[eE]\+?0*6)$"
)


def _bound(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _domain_schema(
    text: str,
    *,
    low: Decimal,
    low_open: bool,
    high: Decimal,
    high_open: bool,
    example: str,
    what: str,
    smallest: float = SMALLEST,
) -> JsonSchemaValue:
    """An amount's JSON schema: a JSON number in its domain, or decimal text (``text``);
    ``smallest``: the least nonzero magnitude (where the server derives smaller values)."""
    number: JsonSchemaValue = {"type": "number"}
    forms: list[JsonSchemaValue] = [number]
    if low == ZERO:
        # nonzero magnitudes below 1e-300 are refused (exponent out of range), zero is not
        number["minimum"] = smallest
        if not low_open:
            forms.append({"type": "number", "const": 0})
    else:
        number["exclusiveMinimum" if low_open else "minimum"] = _bound(low)
    number["exclusiveMaximum" if high_open else "maximum"] = _bound(high)
    forms.append({"type": "string", "pattern": text, "maxLength": 64})
    return {
        "anyOf": forms,
        "description": f"{what}: an exact decimal, as a JSON number or as decimal text such as "
        f'"{example}"',
        "examples": [example],
    }


def _domain(
    low: Decimal,
    high: Decimal,
    example: str,
    what: str,
    *,
    low_open: bool = False,
    high_open: bool = False,
    smallest: float = SMALLEST,
    text: str | None = None,
) -> WithJsonSchema:
    """An amount's documented domain, from low to high (each bound open or closed): its
    schema (:func:`_domain_schema`), whose decimal text, unless given, is derived from the
    domain, which then starts at 0 and ends at a power of ten."""
    if text is None:
        k = len(str(int(high))) - 1
        assert low == ZERO and high == Decimal(10) ** k, (low, high)
        text = _decimal_text(k, positive=low_open, top=not high_open)
    return WithJsonSchema(
        _domain_schema(
            text,
            low=low,
            low_open=low_open,
            high=high,
            high_open=high_open,
            example=example,
            what=what,
            smallest=smallest,
        )
    )


def _described(domain: Domain) -> WithJsonSchema:
    """The schema of an amount in one of the accounting core's domains (an order's text where
    the domain starts at 1: (1, 10⁶])."""
    text = None
    if domain.low == ONE:
        assert domain.low_open and domain.high == Decimal(10) ** 6, domain
        text = ORDER_TEXT
    return _domain(
        domain.low,
        domain.high,
        domain.example,
        domain.what,
        low_open=domain.low_open,
        high_open=domain.high_open,
        text=text,
    )


def amount_in(domain: Domain) -> Any:
    """The request type of an amount in ``domain`` (a field of the core's table, see
    ``app/schemas/mechanisms.py``): as :data:`Privacy` and the others below."""
    return Annotated[Decimal, _READ, _WRITE, _described(domain)]


#: How every amount is read (a JSON number's literal or decimal text of the documented grammar,
#: exactly) and written (decimal text). The domain is documented (``WithJsonSchema``) and
#: checked by the accounting core, which names the field in its answer (``InvalidDeclaration``),
#: as before the schema said it; ``Delta`` and a budget's ε and δ (datasets, sub-budgets, caps,
#: quotas) check theirs here, saying what the value must be (a budget of ε = -1 "must be > 0":
#: the core's configuration check would only say "≥ 0").
_READ = _Read()
_WRITE = PlainSerializer(fmt, return_type=str, when_used="always")

#: The amounts of a declaration are typed from the core's field table (:func:`amount_in`); these
#: are the ones other request models name.
_MILLION = Decimal(10) ** 6  # the budget's limit (odometer_core…modes.common.check_budget)
#: A privacy parameter (ε, ρ, ξ, μ, τ, an RDP value): 0 … 10⁶.
Privacy = Annotated[Decimal, _READ, _WRITE, _described(PRIVACY)]
#: A budget's ε_B (datasets, sub-budgets, caps, quotas): 0 < ε_B ≤ 10⁶.
BudgetEpsilon = Annotated[
    Decimal,
    _READ,
    AfterValidator(
        lambda v: _within(
            v, positive=True, high=_MILLION, high_open=False, what="a budget's ε: 0 < ε ≤ 10⁶"
        )
    ),
    _WRITE,
    _domain(ZERO, _MILLION, "1", "0 < ε ≤ 10⁶", low_open=True),
]
_PROBABILITY = _described(PROBABILITY)
#: A budget's δ_B (datasets, sub-budgets, caps, quotas): 0 ≤ δ_B < 1, and 0 or at least
#: 1e-298, since the server derives δ_B/10 (basic's default conversion δ) and δ_B/100 (a curve
#: cap's) and reads them again, where 1e-300 is the least magnitude it reads.
BudgetDelta = Annotated[
    Decimal,
    _READ,
    AfterValidator(
        lambda v: _within(v, positive=False, high=ONE, high_open=True, what="a δ: 0 ≤ δ < 1")
    ),
    _WRITE,
    _domain(
        ZERO, ONE, "0.00001", "0 ≤ δ < 1 (0, or at least 1e-298)", high_open=True, smallest=1e-298
    ),
]
#: A δ the accounting core checks (declarations, a configuration's conversion δ).
Probability = Annotated[Decimal, _READ, _WRITE, _PROBABILITY]
#: A δ checked here, in the request model (0 ≤ δ < 1), where the accounting core only compares
#: the value with the budget's δ, so that a negative or huge one is refused instead of being
#: recorded.
Delta = Annotated[Decimal, _READ, AfterValidator(_probability), _WRITE, _PROBABILITY]
#: A sampling rate or an order's weight: 0 … 1.
Rate = Annotated[Decimal, _READ, _WRITE, _described(RATE)]
#: An RDP order α: 1 < α ≤ 10⁶.
Order = Annotated[Decimal, _READ, _WRITE, _described(ORDER)]


#: An integer as text: ASCII digits; a ``-`` only on a nonzero number, which the field's
#: bounds then refuse naming them (``-0`` would be read as 0).
_INTEGER_TEXT = re.compile(r"\+?[0-9]{1,30}|-0*[1-9][0-9]{0,29}")


def json_integer(number: JsonNumber) -> int | None:
    """The integer a JSON number's literal writes, exactly (``3.0`` and ``3e0`` are 3);
    ``None`` when it has a fraction (``2.5``, ``1e-400``: not the 0 its float rounds to) or
    more than 31 digits."""
    exact = Decimal(number.text)
    if exact.adjusted() > 30 or exact != exact.to_integral_value():
        return None
    return int(exact)


def _integer(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    if isinstance(value, JsonNumber):  # its literal, exactly: 1e-400 is not 0, 1.0 is 1
        integer = json_integer(value)
        if integer is not None:
            return integer
        if Decimal(value.text).adjusted() > 30:
            return value  # far outside every bound, which pydantic then names
        raise ValueError(f"must be an integer, got {value.text}")
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value) is None:
        raise ValueError(
            f"must be an integer: a JSON number, or ASCII digits with no sign but +, got "
            f"{value[:_MAX_TEXT]!r}"
        )
    return value


#: Refuses booleans before pydantic's int coercion would read ``true`` as 1. A bounded
#: integer is written ``Annotated[int, Field(ge=…, le=…), NOT_A_BOOLEAN]``: with the bounds
#: *before* the validator the schema says ``minimum``/``maximum``; after it, pydantic can only
#: document them as non-standard ``ge``/``le`` keys that clients and fuzzers ignore.
NOT_A_BOOLEAN = BeforeValidator(_integer)


def optional(**kwargs: Any) -> Any:
    """An omittable field: ``None`` when absent, documented without ``null``."""
    return Field(default=None, json_schema_extra=not_null, **kwargs)


class StrictModel(BaseModel):
    """Unknown fields are refused; an explicit ``null`` is refused too (omit the field
    instead), so every accepted document has exactly one meaning."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            nulls = sorted(str(k) for k, v in data.items() if v is None)
            if nulls:
                raise ValueError(
                    f"null is not allowed (omit the field instead): {', '.join(nulls)}"
                )
        return data


def not_null(schema: JsonSchemaValue) -> None:
    """JSON-schema hook for optional fields: document them as omittable, not nullable."""
    variants = schema.pop("anyOf", None)
    if variants is not None:
        kept = [v for v in variants if v != {"type": "null"}]
        if len(kept) == 1:
            schema.update(kept[0])
        else:
            schema["anyOf"] = kept
    schema.pop("default", None)


# ------------------------------------------------------------------------- amounts in responses
#: Decimal text as the server writes it: exact decimals (``fmt``: "0.1", "1E-25", "Infinity" for
#: a cost that no budget admits) and an RDP curve's floats (``repr``: "0.25", "1e-05", "inf").
DecimalText = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|Infinity|inf)$",
        }
    ),
]


class Documented(BaseModel):
    """A response part that is documented, not built: see :class:`SchemaOnly`."""

    model_config = ConfigDict(extra="forbid")


class EpsilonDeltaAmount(Documented):
    """(ε, δ): ``basic`` (a dataset, a sub-budget, an organisation's cap or an analyst's quota
    counted in that mode)."""

    epsilon: DecimalText
    delta: DecimalText


class RhoDeltaAmount(Documented):
    """(ρ, δ): ``zcdp``."""

    rho: DecimalText
    delta: DecimalText


class RdpAmount(Documented):
    """An RDP curve ε(α) at each order of the filter's grid (``orders`` and ``rdp`` have the
    same length), and δ: ``rdp``."""

    orders: list[DecimalText]
    rdp: list[DecimalText]
    delta: DecimalText


class MuSquaredAmount(Documented):
    """μ²: ``gdp``."""

    mu_squared: DecimalText


class NothingCharged(Documented):
    """``{}``: an invocation refused above its dataset (by the organisation's cap or the
    analyst's quota) charged nothing on the dataset."""


#: What a decision charges, asks for, leaves or refunds, in the currency of the filter that
#: decided it: each currency has its own required keys (``epsilon``, ``rho``, ``orders`` and
#: ``rdp``, ``mu_squared``), so exactly one of the four schemas matches an amount.
AmountUnion: TypeAlias = EpsilonDeltaAmount | RhoDeltaAmount | RdpAmount | MuSquaredAmount


class SchemaOnly:
    """Documents a field as ``documented`` (components and references included) while the
    field is read and written as its own type: the server renders these bodies from the
    accounting core's JSON, which the schema describes and ``tests/api/test_openapi.py`` holds
    to it, so nothing is checked or rewritten on the way out."""

    def __init__(self, documented: Any) -> None:
        self._core = TypeAdapter(documented).core_schema

    def __get_pydantic_json_schema__(
        self, core_schema: Any, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(self._core)


#: An amount in a response (see :data:`AmountUnion`), passed through as the core wrote it.
AmountOut = Annotated[JSONObject, SchemaOnly(AmountUnion)]


# ------------------------------------------------------------------------ fields that go together
class Form:
    """One form a request object takes: the fields it has (``required`` of them always; all of
    them if not given) and no others, a field's schema replaced where ``narrowed`` gives one."""

    def __init__(
        self, fields: tuple[str, ...], required: tuple[str, ...] | None = None, **narrowed: Any
    ) -> None:
        self.fields, self.required, self.narrowed = fields, required or fields, narrowed

    def schema(self, properties: JsonSchemaValue) -> JsonSchemaValue:
        return {
            "type": "object",
            "properties": {
                name: self.narrowed.get(name) or copy.deepcopy(properties[name])
                for name in self.fields
            },
            "required": list(self.required),
            "additionalProperties": False,
        }


def one_form_of(schema: JsonSchemaValue, *forms: Form) -> None:
    """Say in a model's schema (``json_schema_extra``) which fields go together: exactly one
    of ``forms`` (``oneOf``: the forms must not overlap), under ``allOf`` beside the model's own
    ``properties``. The rule is checked by the accounting core or the service, as before the
    schema said it. A reader that knows only ``properties`` (the client's check before sending,
    ``odometer_client.contract``, which skips ``allOf``) still checks each field as before and
    names it; a validator applies the forms too; a generated client types the model as its
    properties and one of the forms."""
    properties = schema["properties"]
    schema["allOf"] = [{"oneOf": [form.schema(properties) for form in forms]}]


class ErrorBody(BaseModel):
    """Every error: a stable code, a human-readable detail, and code-specific fields."""

    model_config = ConfigDict(extra="allow")

    error: str = Field(examples=["BudgetExceeded"])
    detail: str


class BudgetExceededBody(ErrorBody):
    """409 for a rejected invocation (written to the ledger as ``invocation_rejected``)."""

    id: str
    level: Literal["dataset", "organisation", "quota"] = Field(
        description="the level that refused: the dataset budget, the organisation's cap or "
        "the analyst's quota"
    )
    requested: AmountOut = Field(
        description="what the refusing level was asked for, in its currency"
    )
    remaining: AmountOut = Field(description="what the refusing level has left")
    ledger_seq: int
    blocks: list[JSONObject] | None = Field(
        default=None,
        description="partitioned datasets: the selected blocks that refused (at most 20 "
        "ranges), each with what it has left and why",
    )
    summary: RefusalSummary | None = Field(
        default=None,
        description="the refusal in one line, with what would fit instead (whole datasets)",
    )


def render(model: BaseModel) -> str:
    """A response body as sent and stored under an idempotency key: the model's fields in
    declaration order, an absent (``None``) top-level field left out, as compact UTF-8 JSON
    (the same form as the API's JSON responses, encoded by orjson). Nested values are written
    as they are; amounts are text, never binary floats (orjson would write a NaN float as
    ``null`` where the standard encoder refused it)."""
    fields = {name: value for name, value in model.model_dump().items() if value is not None}
    return orjson.dumps(fields).decode()
