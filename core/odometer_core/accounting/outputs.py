"""The cell of a released output: settlement from what a template actually released.

For the server-side templates the ODP cell is a function of the released output (Hartmann et
al. 2022, §4–§6), so the analyst may send the output — or the part of it that decides the cell —
instead of naming the cell. :func:`cell_from_output` is that function, one branch per template,
pure and total: an output the template cannot have produced raises :class:`DeclarationError`
(it would otherwise be charged as some cell it does not belong to).

The wire forms (``docs/http-api.md``):

=================  ======================================================  ==================
kind               ``output``                                              cell
=================  ======================================================  ==================
``svt``            the answers in order, ``true`` = ⊤, ``false`` = ⊥       ``tops=<#⊤>``
``ptr``            ``null`` (⊥, refused) or the released value             ``bottom``/``value``
``iterative``      the number of iterations run (a declared stopping point)  ``stop=<k>``
``tested_release`` the verdict: ``true`` (passed, released) or ``false`` /   ``released``/
                   ``null`` (failed, ⊥)                                    ``bottom``
=================  ======================================================  ==================

A plain ``odp`` declaration's partition is the analyst's own: the service cannot know which
output falls in which named cell, so it is settled by naming the cell only.
"""

from __future__ import annotations

from collections.abc import Sequence

from odometer_core.accounting.declarations import (
    MAX_STEPS,
    ODP,
    PTR,
    SVT,
    Declaration,
    DeclarationError,
    Iterative,
    OdpCapable,
    TestedRelease,
)

#: The request field an output arrives in (named in every error).
FIELD = "output"


def cell_from_output(decl: Declaration, output: object) -> str:
    """The name of the partition cell of ``decl`` that the released ``output`` lies in.

    Raises :class:`DeclarationError` when ``decl`` has no output-determined partition (a plain
    ``odp`` or a non-ODP kind) or when ``output`` is impossible for the template.
    """
    if isinstance(decl, SVT):
        return _svt(decl, output)
    if isinstance(decl, PTR):
        return _ptr(output)
    if isinstance(decl, Iterative):
        return _iterative(decl, output)
    if isinstance(decl, TestedRelease):
        return _tested_release(output)
    if isinstance(decl, ODP):
        raise DeclarationError(
            "a plain 'odp' declaration's cells are the analyst's own: the service cannot tell "
            "which cell an output lies in; send 'cell' instead of 'output'",
            field=FIELD,
        )
    if isinstance(decl, OdpCapable):  # pragma: no cover - every ODP kind is handled above
        raise DeclarationError(f"'{decl.kind}' cannot be settled from its output", field=FIELD)
    raise DeclarationError(f"'{decl.kind}' has no output-dependent partition", field=FIELD)


def _svt(decl: SVT, output: object) -> str:
    """Algorithm 2 of Hartmann et al. 2022 answers queries until the stream stops or the c-th ⊤
    (line 4: ``count ≥ c`` → BREAK); Lemma 8's cell S_c' is the outputs with exactly c' ⊤.

    So an answer vector is possible iff it has at most c ⊤ and nothing after the c-th ⊤; the
    empty vector (the stream stopped at once) lies in S_0.
    """
    if not isinstance(output, Sequence) or isinstance(output, str | bytes):
        raise DeclarationError(
            "an SVT output is the list of answers in order (true = ⊤, false = ⊥)", field=FIELD
        )
    if len(output) > MAX_STEPS:
        raise DeclarationError(f"an SVT output has at most {MAX_STEPS} answers", field=FIELD)
    # C-level passes (a body may hold ~10⁵ answers and this runs under the dataset's lock)
    if not set(map(type, output)) <= {bool}:
        position, answer = next((i, a) for i, a in enumerate(output) if type(a) is not bool)
        raise DeclarationError(
            f"SVT answer {position} must be true (⊤) or false (⊥), got {_show(answer)}",
            field=FIELD,
        )
    tops = output.count(True)
    if tops > decl.c or (tops == decl.c and not output[-1]):
        seen, position = 0, 0
        while seen < decl.c:  # the position just after the c-th ⊤
            seen += output[position]
            position += 1
        raise DeclarationError(
            f"SVT halts once it has answered ⊤ c = {decl.c} times (Algorithm 2, line 4): "
            f"answer {position} comes after that",
            field=FIELD,
        )
    return f"tops={tops}"


def _ptr(output: object) -> str:
    """A PTR function releases a value or ⊥ (Hartmann et al. 2022, Definition 9; Lemma 10 for
    the IQR construction): ⊥ (``null``) lies in the ``bottom`` cell, any value in ``value``.

    A boolean is refused: PTR releases statistics, and ``false`` is far more likely a "refused"
    meant as ⊥ than a released value (it would be charged the dearer ``value`` cell).
    """
    if output is None:
        return "bottom"
    if isinstance(output, bool):
        raise DeclarationError(
            "a PTR output is null (⊥, refused) or the released value, not a boolean",
            field=FIELD,
        )
    return "value"


def _iterative(decl: Iterative, output: object) -> str:
    """Algorithm 3 of Hartmann et al. 2022 returns after k_i iterations for some declared
    stopping point k_i only (lines 3–7); Lemma 11's cell P_i is the outputs of length k_i."""
    if type(output) is not int:
        raise DeclarationError(
            "an iterative output is the number of iterations run, an integer", field=FIELD
        )
    points = decl.stopping_points
    if output > points[-1]:
        raise DeclarationError(
            f"step {output} is beyond the last stopping point {points[-1]}", field=FIELD
        )
    if output not in points:
        raise DeclarationError(
            f"step {output} is not a declared stopping point "
            f"({', '.join(str(k) for k in points)}): Algorithm 3 stops at those only",
            field=FIELD,
        )
    return f"stop={output}"


def _tested_release(output: object) -> str:
    """Algorithm 5 of Hartmann et al. 2022 releases the model when the DP test passes and ⊥
    otherwise (Corollary 18's cells): the verdict decides the cell."""
    if output is True:
        return "released"
    if output is False or output is None:
        return "bottom"
    raise DeclarationError(
        "a tested release's output is the test's verdict: true (passed, released) or "
        "false / null (failed, ⊥)",
        field=FIELD,
    )


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["cell_from_output"]
