"""What the client sends: one :class:`~typing.TypedDict` per request body of the server's
document (``DatasetCreate``, ``BudgetPatch``, ``InvocationCreate``, ``SettleRequest``,
``GrantCreate``, ``OrganisationCap``, ``CapacityQuery``, ``PrincipalCreate``), as
:mod:`odometer_client._core` builds them. Amounts travel as decimal text (a ``Decimal``) or as
the JSON number the caller gave; the server reads both exactly."""

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from odometer_client.shapes import Declaration

#: An amount as sent: decimal text, or the JSON number the caller gave.
JSONNumber: TypeAlias = str | int | float
#: What the caller passes through as given (an accounting mode's options, a partition, a
#: selection of blocks, an output to settle from): the server's document says their fields
#: (``BasicAccounting`` … ``SplitAccounting``, ``PartitionIn``, ``BlockRanges``), and the server
#: judges them; the client only writes their decimals as text.
PassedThrough: TypeAlias = Mapping[str, Any]


class BudgetBody(TypedDict):
    """A target (ε, δ) (``Budget``)."""

    epsilon: JSONNumber
    delta: JSONNumber


class DatasetBody(TypedDict):
    """A new dataset (``DatasetCreate``)."""

    name: str
    budget: BudgetBody
    relation: str
    accounting: NotRequired[PassedThrough]
    partition: NotRequired[PassedThrough]


class BudgetChangeBody(BudgetBody):
    """A new target for a dataset or one of its sub-budgets (``BudgetPatch``)."""

    sub_budget: NotRequired[str]
    final_conversion_delta: NotRequired[JSONNumber]


class InvocationBody(TypedDict):
    """A registration or its preview (``InvocationCreate``)."""

    mechanism: Declaration
    sub_budget: NotRequired[str]
    conversion_delta: NotRequired[JSONNumber]
    blocks: NotRequired[PassedThrough | Literal["all"]]
    contribution: NotRequired[str]
    neighbours: NotRequired[str]


class SettleBody(TypedDict, total=False):
    """A settlement (``SettleRequest``): the released cell, the released output, or both;
    the output is whatever the mechanism released (any JSON: its digest is recorded)."""

    cell: str
    output: Any


class GrantBody(TypedDict):
    """A grant (``GrantCreate``), with the analyst's quota (ε, δ) if any."""

    principal_id: str
    quota: NotRequired[dict[str, JSONNumber]]


class CapBody(BudgetBody):
    """An organisation's cap (``OrganisationCap``): its target, its mode's options, and
    whether it replaces a cap that has counted."""

    accounting: NotRequired[PassedThrough]
    replace: NotRequired[bool]


class CapacityBody(TypedDict):
    """How many more of a declaration a cap admits (``CapacityQuery``)."""

    mechanism: Declaration
    dataset_id: NotRequired[str]
    conversion_delta: NotRequired[JSONNumber]


class PrincipalBody(TypedDict):
    """A new principal (``PrincipalCreate``)."""

    name: str
    role: str
    organisation_id: NotRequired[str]
