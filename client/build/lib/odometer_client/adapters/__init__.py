"""Declarations from the DP libraries analysts already use.

- :mod:`odometer_client.adapters.opendp`: an OpenDP measurement and its ``d_in``;
- :mod:`odometer_client.adapters.dp_accounting`: a ``dp_accounting`` ``DpEvent``.

Each module imports its library when it is imported (``pip install
'privacy-odometer-client[opendp]'`` or ``[dp-accounting]``); this package imports neither.
"""
