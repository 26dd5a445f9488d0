"""Small, dependency-free SVG charts of a dataset report (spend vs budget, per analyst).

The charts are built from the report document (:func:`app.services.reports.dataset_report`)
as plain strings. Every piece of text that reaches the markup goes through :func:`text`,
which escapes XML metacharacters and drops characters XML 1.0 cannot carry: analyst names
are chosen by users, and the dashboard inlines these documents into its page. Amounts are
exact decimals in the report; they become floats here only as drawing coordinates, and the
labels print the exact decimal strings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape

WIDTH = 720
#: Plot margins: left (value labels), right, top (title, legend), bottom (axis labels).
LEFT, RIGHT, TOP, BOTTOM = 90, 24, 56, 48
SPEND_HEIGHT = 340
BAR_HEIGHT, BAR_GAP = 22, 10
#: At most this many analysts are drawn (the largest spenders); the rest are summarised.
MAX_BARS = 40
SPENT_COLOUR, BUDGET_COLOUR, REFUND_COLOUR = "#1f6feb", "#cf222e", "#8bc34a"
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n'


def text(value: object) -> str:
    """``value`` as safe XML character data or attribute text (quotes escaped too)."""
    cleaned = _NOT_XML.sub("\ufffd", str(value))
    return escape(cleaned, {'"': "&quot;", "'": "&apos;"})


def _label(value: object, limit: int = 40) -> str:
    raw = str(value)
    return text(raw if len(raw) <= limit else raw[: limit - 1] + "…")


def _svg(width: int, height: int, title: str, desc: str, body: Sequence[str]) -> str:
    return (
        _HEADER + f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="t d" '
        f'font-family="sans-serif" font-size="12">\n'
        f'<title id="t">{text(title)}</title>\n<desc id="d">{text(desc)}</desc>\n'
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>\n'
        + "\n".join(body)
        + "\n</svg>\n"
    )


def _num(value: Decimal) -> str:
    return f"{float(value):.2f}"


def spend_chart(report: Mapping[str, Any]) -> str:
    """Spend vs budget over the ledger: the spend as a step line, the budget as a (dashed,
    usually horizontal) step line; x is the ledger position (seq), y the series unit."""
    series = report["series"]
    unit, points = str(series["unit"]), list(series["points"])
    name = report["dataset"]["name"]
    title = f"Spend vs budget ({unit}) of dataset {name}"
    if not points:
        return _svg(WIDTH, SPEND_HEIGHT, title, "No ledger entries.", [])
    spent = [Decimal(p["spent"]) for p in points]
    budget = [Decimal(p["budget"]) for p in points]
    seqs = [int(p["seq"]) for p in points]
    top = max([*spent, *budget, Decimal(0)]) or Decimal(1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, SPEND_HEIGHT - TOP - BOTTOM
    # each point holds until the next one; the last holds for one more stride, so that
    # the final step (e.g. a refund at the head) stays visible
    first, last = 0, seqs[-1] + int(series.get("stride", 1))

    def x(seq: int) -> str:
        return _num(Decimal(LEFT) + Decimal(plot_w) * (seq - first) / (last - first))

    def y(value: Decimal) -> str:
        value = min(value, top * Decimal("1.1"))
        return _num(Decimal(TOP + plot_h) - Decimal(plot_h) * value / (top * Decimal("1.1")))

    def steps(values: Sequence[Decimal], start: Decimal) -> str:
        level = y(start)
        coords = [f"{x(first)},{level}"]
        for seq, value in zip(seqs, values, strict=True):
            coords.append(f"{x(seq)},{level}")
            level = y(value)
            coords.append(f"{x(seq)},{level}")
        coords.append(f"{x(last)},{level}")
        return " ".join(coords)

    now_spent, now_budget = points[-1]["spent"], points[-1]["budget"]
    desc = (
        f"{len(points)} points up to ledger entry {seqs[-1]}; spent {now_spent} of "
        f"{now_budget} {unit}."
    )
    base_y, right_x = TOP + plot_h, LEFT + plot_w
    body = [
        f'<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{_label(title, 80)}</text>',
        f'<line x1="{LEFT}" y1="{base_y}" x2="{right_x}" y2="{base_y}" stroke="#555"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base_y}" stroke="#555"/>',
        f'<text x="{LEFT - 6}" y="{base_y}" text-anchor="end">0</text>',
        f'<text x="{LEFT - 6}" y="{y(budget[-1])}" text-anchor="end" '
        f'fill="{BUDGET_COLOUR}">{_label(now_budget, 14)}</text>',
        f'<polyline class="budget" points="{steps(budget, budget[0])}" fill="none" '
        f'stroke="{BUDGET_COLOUR}" stroke-width="2" stroke-dasharray="6 4"/>',
        f'<polyline class="spent" points="{steps(spent, Decimal(0))}" fill="none" '
        f'stroke="{SPENT_COLOUR}" stroke-width="2.5"/>',
        f'<text x="{LEFT}" y="{base_y + 18}">seq {first}</text>',
        f'<text x="{x(seqs[-1])}" y="{base_y + 18}" text-anchor="middle">seq {seqs[-1]}</text>',
        f'<text x="{right_x}" y="{base_y + 36}" text-anchor="end" fill="#555">'
        f"{_label(points[-1]['at'], 40)}</text>",
        f'<rect x="{LEFT}" y="32" width="14" height="4" fill="{SPENT_COLOUR}"/>',
        f'<text x="{LEFT + 20}" y="38">spent {_label(now_spent, 30)}</text>',
        f'<rect x="{LEFT + 220}" y="32" width="14" height="4" fill="{BUDGET_COLOUR}"/>',
        f'<text x="{LEFT + 240}" y="38">budget {_label(now_budget, 30)} {text(unit)}</text>',
    ]
    return _svg(WIDTH, SPEND_HEIGHT, title, desc, body)


def analysts_chart(report: Mapping[str, Any]) -> str:
    """Per-analyst horizontal bars: net charge in the series unit, with the refunded part
    drawn after it in a lighter colour; the largest :data:`MAX_BARS` spenders."""
    unit = str(report["series"]["unit"])
    rows = sorted(
        report["analysts"],
        key=lambda r: (-Decimal(r["charged"].get(unit, "0")), str(r["actor"])),
    )
    shown, hidden = rows[:MAX_BARS], len(rows) - MAX_BARS
    title = f"Spend per analyst ({unit}) of dataset {report['dataset']['name']}"
    height = TOP + max(len(shown), 1) * (BAR_HEIGHT + BAR_GAP) + BOTTOM
    label_w = 200
    plot_w = WIDTH - LEFT - RIGHT - label_w
    charged = [Decimal(r["charged"].get(unit, "0")) for r in shown]
    refunded = [Decimal(r["refunded"].get(unit, "0")) for r in shown]
    top = max([c + f for c, f in zip(charged, refunded, strict=True)] + [Decimal(0)])
    top = top or Decimal(1)
    body = [
        f'<text x="{LEFT - 70}" y="22" font-size="15" font-weight="bold">{_label(title, 80)}'
        "</text>",
        f'<rect x="{LEFT - 70}" y="32" width="14" height="8" fill="{SPENT_COLOUR}"/>',
        f'<text x="{LEFT - 50}" y="40">charged (net)</text>',
        f'<rect x="{LEFT + 60}" y="32" width="14" height="8" fill="{REFUND_COLOUR}"/>',
        f'<text x="{LEFT + 80}" y="40">refunded</text>',
    ]
    if not shown:
        body.append(f'<text x="{LEFT - 70}" y="{TOP + 16}">No invocations yet.</text>')
    x0 = LEFT - 70 + label_w
    for i, row in enumerate(shown):
        y = TOP + i * (BAR_HEIGHT + BAR_GAP)
        w_charged = Decimal(plot_w) * max(charged[i], Decimal(0)) / top
        w_refund = Decimal(plot_w) * refunded[i] / top
        who = row["name"] or row["actor"]
        body += [
            f'<g class="analyst"><title>{text(who)} ({text(row["actor"])}): charged '
            f"{text(row['charged'].get(unit, '0'))}, refunded "
            f"{text(row['refunded'].get(unit, '0'))}, rejected {int(row['rejected'])}</title>",
            f'<text x="{x0 - 8}" y="{y + 15}" text-anchor="end">{_label(who, 28)}</text>',
            f'<rect x="{x0}" y="{y}" width="{_num(w_charged)}" height="{BAR_HEIGHT}" '
            f'fill="{SPENT_COLOUR}"/>',
            f'<rect x="{_num(x0 + w_charged)}" y="{y}" width="{_num(w_refund)}" '
            f'height="{BAR_HEIGHT}" fill="{REFUND_COLOUR}"/>',
            f'<text x="{_num(x0 + w_charged + w_refund + 6)}" y="{y + 15}">'
            f"{_label(row['charged'].get(unit, '0'), 24)}</text></g>",
        ]
    if hidden > 0:
        body.append(f'<text x="{x0}" y="{height - 16}">… and {hidden} more analysts</text>')
    desc = f"{len(rows)} analysts; net charge and refunds in {unit}."
    return _svg(WIDTH, height, title, desc, body)
