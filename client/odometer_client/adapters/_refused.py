"""The refusal every adapter raises when the odometer answers 409 before its library ran
anything: the refusal's summary and figures (a :class:`~odometer_client.errors.BudgetExceeded`),
the declaration that was refused, what would fit instead when the server says one, and one
message that says what did not happen."""

from __future__ import annotations

import json
from typing import Any

from odometer_client.declarations import Mechanism
from odometer_client.errors import BudgetExceeded


class AdapterRefused(BudgetExceeded):
    """The odometer refused ``what`` (409), ``so`` nothing of it ran.

    ``summary`` and ``requested``/``remaining`` are the refusal's; ``instead`` is the
    declaration that would fit now, when the server says one (``None`` otherwise);
    ``declared`` the refused declaration."""

    def __init__(self, refusal: BudgetExceeded, declared: Mechanism, *, what: str, so: str) -> None:
        super().__init__(refusal.status_code, refusal.body)
        self.declared = declared
        summary = self.summary or {}
        self.instead: Any = summary.get("instead")
        why = str(summary.get("text") or refusal.detail or "budget exceeded")
        message = f"the odometer refused {what}, so {so}: {why}"
        if self.instead is not None:
            message += (
                f"; would fit instead: {json.dumps(self.instead, sort_keys=True, default=str)}"
            )
        self.args = (message,)
