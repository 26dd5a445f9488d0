"""Python client of the privacy odometer (sync and async), declaration helpers, errors.

Its only third-party dependency is httpx; the adapters (:mod:`odometer_client.adapters`) load
their DP library only when called, and the offline verifier (``odometer verify``) comes with
the accounting core (``pip install ./client ./core`` from a checkout of the repository).

```python
from odometer_client import OdometerClient, declarations as d

with OdometerClient() as client:  # $ODOMETER_URL, $ODOMETER_API_KEY
    ds = client.create_dataset("demo", "1", "1e-6")
    with client.reserve(ds, d.odp({"none": "0.2", "some": "0.5"}, delta="1e-7")) as r:
        cell = run_my_mechanism()
        r.settle(cell)
```
"""

from odometer_client import declarations
from odometer_client._async.client import AsyncOdometerClient, AsyncReservation
from odometer_client._core import RetryPolicy
from odometer_client._sync.client import OdometerClient, Reservation
from odometer_client.declarations import Mechanism
from odometer_client.errors import (
    ApiError,
    BudgetExceeded,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    OdometerError,
    ReservationNotSettled,
    ServerError,
    TransportError,
    Unauthorized,
)
from odometer_client.models import (
    BlockRange,
    BlockRun,
    BlocksChanged,
    BlocksPage,
    BlocksPreview,
    Dataset,
    Invocation,
    PreviewResult,
    Settlement,
)
from odometer_client.results import (
    CapCapacity,
    DatasetDraw,
    FrozenDataset,
    Grant,
    GrantCreated,
    IssuedKey,
    LedgerEntry,
    LedgerRecovered,
    Me,
    Organisation,
    OrganisationReport,
    Principal,
    Report,
    RevokedKey,
    WitnessState,
)

__version__ = "0.2.0"

__all__ = [
    "ApiError",
    "AsyncOdometerClient",
    "AsyncReservation",
    "BlockRange",
    "BlockRun",
    "BlocksChanged",
    "BlocksPage",
    "BlocksPreview",
    "BudgetExceeded",
    "CapCapacity",
    "Conflict",
    "Dataset",
    "DatasetDraw",
    "Forbidden",
    "FrozenDataset",
    "Grant",
    "GrantCreated",
    "InvalidRequest",
    "Invocation",
    "IssuedKey",
    "LedgerEntry",
    "LedgerRecovered",
    "Me",
    "Mechanism",
    "NotFound",
    "OdometerClient",
    "OdometerError",
    "Organisation",
    "OrganisationReport",
    "PreviewResult",
    "Principal",
    "Report",
    "Reservation",
    "ReservationNotSettled",
    "RetryPolicy",
    "RevokedKey",
    "ServerError",
    "Settlement",
    "TransportError",
    "Unauthorized",
    "WitnessState",
    "declarations",
]
