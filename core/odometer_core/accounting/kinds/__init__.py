"""The declaration kinds, one module per family: :mod:`.base` (limits, field parsers, the base
class and its mixins), :mod:`.plain`, :mod:`.mechanisms`, :mod:`.odp`, :mod:`.sampling` and
:mod:`.composition`; and :mod:`.fields`, the field table where each kind's payload is said once
(its fields, their bounds, the document's words), which the kinds' parsers, the server's request
models, its OpenAPI document and the client's helpers are derived from.

A kind is built from a payload only through the closed registry of
:mod:`odometer_core.accounting.declarations`, which is also where every kind is imported from.
"""
