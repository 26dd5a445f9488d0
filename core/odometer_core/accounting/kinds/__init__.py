"""The declaration kinds, one module per family: :mod:`.base` (limits, field parsers, the base
class and its mixins), :mod:`.plain`, :mod:`.mechanisms`, :mod:`.odp`, :mod:`.sampling` and
:mod:`.composition`.

A kind is built from a payload only through the closed registry of
:mod:`odometer_core.accounting.declarations`, which is also where every kind is imported from.
"""
