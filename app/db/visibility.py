"""Who may see a dataset: the one rule, as a condition of a ``SELECT`` over datasets.

A caller is confined to a *scope* (the one organisation whose datasets it may see; ``None``: every
organisation, the admin) and, when it is an analyst, to the datasets it holds a grant on
(:attr:`app.services.principals.Principal.viewer` derives both from a principal). A dataset
outside is indistinguishable from a missing one: the services answer 404 for both.

The rule is applied by :func:`visible` to every query that finds datasets for a caller: the
write path's lock statements (:mod:`app.writepath.admission`, where a dataset the caller may
not see is never locked), the ORM's reads and locks of one dataset and its listing
(:class:`app.db.repositories.DatasetRepository`). Its parameters (``scope``, ``analyst``) are
bound at execution (:func:`visibility_params`), so the statements built with it are the same
text for every caller of one shape and can be written out once.
"""

from __future__ import annotations

from typing import Final, TypeVarTuple

from sqlalchemy import FromClause, Select, and_, bindparam

Ts = TypeVarTuple("Ts")

#: the bound parameters' names
SCOPE: Final = "scope"
ANALYST: Final = "analyst"


def visible(
    query: Select[*Ts],
    datasets: FromClause,
    grants: FromClause,
    *,
    scoped: bool,
    analyst: bool,
) -> Select[*Ts]:
    """``query`` (whose FROM has ``datasets``, a table or an alias of it) narrowed to the
    datasets a caller may see: of the organisation bound as ``scope`` when ``scoped``; for an
    ``analyst``, joined to the grant of the principal bound as ``analyst`` (no grant, no row;
    ``grants``, a table or an alias, then yields that grant's columns too)."""
    if scoped:
        query = query.where(datasets.c.organisation == bindparam(SCOPE))
    if analyst:
        query = query.join(
            grants,
            and_(
                grants.c.dataset_id == datasets.c.id,
                grants.c.principal_id == bindparam(ANALYST),
            ),
        )
    return query


def visibility_params(scope: str | None, analyst: str | None) -> dict[str, str]:
    """The parameters :func:`visible` binds, for a caller confined to ``scope`` (``None``: all
    organisations) and, for an analyst, to the datasets ``analyst`` is granted."""
    params = {}
    if scope is not None:
        params[SCOPE] = scope
    if analyst is not None:
        params[ANALYST] = analyst
    return params
