"""The privacy odometer's accounting core and ledger format: what an auditor needs offline.

- :mod:`odometer_core.accounting`: every notion, conversion, subsampling rule and filter mode
  (a pure library: numpy, scipy, dp_accounting for PLD).
- :mod:`odometer_core.ledger`: the hash-chained ledger entry, its export formats, checkpoints
  and the replay that re-derives every decision.
- :mod:`odometer_core.verify`: ``odometer verify``, the offline verifier.

Nothing here imports the server (FastAPI, SQLAlchemy) or the HTTP client.
"""

__version__ = "0.2.0"
