"""Python client of the privacy odometer (sync and async), declaration helpers, errors.

```python
from app.client import OdometerClient, declarations as d

with OdometerClient() as client:  # $ODOMETER_URL, $ODOMETER_API_KEY
    ds = client.create_dataset("demo", "1", "1e-6")
    with client.reserve(ds, d.odp({"none": "0.2", "some": "0.5"}, delta="1e-7")) as r:
        cell = run_my_mechanism()
        r.settle(cell)
```
"""

from app.client import declarations
from app.client._core import RetryPolicy
from app.client.aio import AsyncOdometerClient, AsyncReservation
from app.client.errors import (
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
from app.client.models import Dataset, Invocation, PreviewResult, Settlement
from app.client.sync import OdometerClient, Reservation

__all__ = [
    "ApiError",
    "AsyncOdometerClient",
    "AsyncReservation",
    "BudgetExceeded",
    "Conflict",
    "Dataset",
    "Forbidden",
    "InvalidRequest",
    "Invocation",
    "NotFound",
    "OdometerClient",
    "OdometerError",
    "PreviewResult",
    "Reservation",
    "ReservationNotSettled",
    "RetryPolicy",
    "ServerError",
    "Settlement",
    "TransportError",
    "Unauthorized",
    "declarations",
]
