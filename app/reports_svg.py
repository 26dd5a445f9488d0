"""Small, dependency-free SVG charts of a dataset report (spend vs budget, per analyst).

The charts are built from the report document (:func:`app.services.reports.dataset_report`)
as plain strings. Every piece of text that reaches the markup goes through :func:`text`,
which escapes XML metacharacters and drops characters XML 1.0 cannot carry: analyst names
are chosen by users, and the dashboard inlines these documents into its page. Amounts are
exact decimals in the report; they become floats here only as drawing coordinates. Printed
amounts are rounded by :func:`shown` in the direction that never flatters (spent up, budget and
remaining down, docs/dashboard.md); each element's ``<title>`` carries the exact value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape

from odometer_core.accounting import summary

WIDTH = 720
#: Plot margins: right, top (title, legend), bottom (time axis); the left one fits the ticks.
RIGHT, TOP, BOTTOM = 24, 64, 52
SPEND_HEIGHT = 340
BAR_HEIGHT, BAR_GAP = 22, 10
#: At most this many analysts are drawn (the largest spenders); the rest are summarised.
MAX_BARS = 40
#: Significant digits of a printed amount (the exact value is in the element's title).
DIGITS = 6
SPENT_COLOUR, COMMITTED_COLOUR, BUDGET_COLOUR, REFUND_COLOUR = (
    "#1f6feb",
    "#bf8700",
    "#cf222e",
    "#8bc34a",
)
#: A sans-serif glyph is about this wide at font-size 12 (to keep labels inside the chart).
CHAR_W = 7
UNIT_SYMBOL = {"epsilon": "ε", "delta": "δ", "rho": "ρ", "mu_squared": "μ²"}
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n'
#: Time-axis steps in seconds: 4 to 6 ticks over any span from milliseconds to years.
_TIME_STEPS = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
    86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 91 * 86400, 182 * 86400, 365 * 86400,
)  # fmt: skip


def text(value: object) -> str:
    """``value`` as safe XML character data or attribute text (quotes escaped too)."""
    cleaned = _NOT_XML.sub("\ufffd", str(value))
    return escape(cleaned, {'"': "&quot;", "'": "&apos;"})


def _label(value: object, limit: int = 40) -> str:
    raw = str(value)
    return text(raw if len(raw) <= limit else raw[: limit - 1] + "…")


def shown(value: Decimal | str, *, up: bool, digits: int = DIGITS) -> str:
    """``value`` with at most ``digits`` significant digits, rounded towards +∞ (``up``: what
    is spent or reserved) or towards −∞ (a budget, what remains), so the figure on screen is
    never more favourable than the exact one. Plain notation from 10⁻⁷ up to below 10¹⁵, else
    scientific: the core's one rounding for display
    (:func:`odometer_core.accounting.summary.shown`), with the charts' digits."""
    return summary.shown(value, up=up, digits=digits, plain_below=15)


def nice_ticks(top: Decimal, count: int = 5) -> list[Decimal]:
    """Ticks 0, s, 2s, … covering ``top`` with a step s of 1, 2, 2.5 or 5 × 10ᵏ: 4 to 6 ticks
    (Heckbert's "nice numbers for graph labels", *Graphics Gems*, 1990, with 2.5 added so
    that a top just past 2 or 5 still gets 4 ticks)."""
    if top <= 0:
        return [Decimal(0), Decimal(1)]
    raw = top / (count - 1)
    power = Decimal(1).scaleb(raw.adjusted())
    step = next(
        m * power
        for m in (Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5), Decimal(10))
        if m * power >= raw
    )
    ticks = [Decimal(0)]
    while ticks[-1] < top:
        ticks.append(ticks[-1] + step)
    return ticks


def tick_labels(ticks: Sequence[Decimal]) -> list[str]:
    """The ticks' labels in one notation: plain, or scientific for all of them when the
    largest is below 10⁻⁴ or from 10⁷ (so 5e-8 never sits under 0.00000015)."""
    top = ticks[-1]
    if top and not -4 <= top.adjusted() < 7:
        return ["0" if not t else format(t.normalize(), "e") for t in ticks]
    return [shown(t, up=False) for t in ticks]


def _svg(width: int, height: int, title: str, desc: str, body: Sequence[str], cls: str = "") -> str:
    root_class = f' class="{text(cls)}"' if cls else ""
    return (
        _HEADER + f'<svg xmlns="http://www.w3.org/2000/svg"{root_class} width="{width}" '
        f'height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="t d" '
        f'font-family="sans-serif" font-size="12">\n'
        f'<title id="t">{text(title)}</title>\n<desc id="d">{text(desc)}</desc>\n'
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>\n'
        + "\n".join(body)
        + "\n</svg>\n"
    )


def _num(value: Decimal | float) -> str:
    return f"{float(value):.2f}"


def _when(at: str) -> datetime:
    """A ledger time (ISO 8601, UTC) as an aware datetime; an unreadable one as the epoch."""
    try:
        parsed = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _time_ticks(start: datetime, end: datetime) -> tuple[list[datetime], str]:
    """Round instants within [start, end], at most 6 (the smallest step that gives no more),
    and the strftime format that tells them apart (milliseconds, seconds, minutes, dates)."""
    span = max((end - start).total_seconds(), 0.001)
    step = next((s for s in _TIME_STEPS if span / s <= 6), _TIME_STEPS[-1])
    t0, t1 = start.timestamp(), end.timestamp()
    k = math.ceil(t0 / step - 1e-9)
    ticks = []
    while k * step <= t1 + 1e-9:
        ticks.append(datetime.fromtimestamp(k * step, UTC))
        k += 1
    fmt = "%H:%M:%S.%f" if step < 1 else "%H:%M:%S" if step < 60 else "%H:%M"
    if step >= 86400:
        fmt = "%Y-%m-%d"
    elif start.date() != end.date():
        fmt = "%m-%d " + fmt
    return ticks, fmt


def _time_label(at: datetime, fmt: str) -> str:
    label = at.strftime(fmt)
    return label[:-3] if fmt.endswith("%f") else label  # milliseconds, not microseconds


def _legend(
    items: Sequence[tuple[str, str, str, Decimal, bool]], unit: str, left: int
) -> tuple[list[str], int]:
    """The legend's markup (colour, series name, dash pattern, value now, rounded up?) and
    its number of rows: an item that would cross the right edge starts a new row. Each item's
    ``<title>`` holds the exact value."""
    symbol = UNIT_SYMBOL.get(unit, unit)
    body: list[str] = []
    at_x, row = left, 0
    for colour, what, dash, value, up in items:
        label = f"{what} {shown(value, up=up)} {symbol}"
        width = 24 + CHAR_W * len(label)
        if at_x > left and at_x + width > WIDTH - RIGHT:
            at_x, row = left, row + 1
        y = 42 + 16 * row
        body += [
            f'<g class="legend"><title>{text(what)}: {text(value)} {text(unit)} (exact)</title>',
            f'<line x1="{at_x}" y1="{y - 4}" x2="{at_x + 18}" y2="{y - 4}" stroke="{colour}" '
            f'stroke-width="3" stroke-dasharray="{dash or "none"}"/>',
            f'<text x="{at_x + 24}" y="{y}">{text(label)}</text></g>',
        ]
        at_x += width + 18
    return body, row + 1


def _span_label(start: datetime, end: datetime) -> str:
    """The time axis' caption: its first and last entries' instants (UTC, to the second)."""
    first = start.strftime("%Y-%m-%d %H:%M:%S")
    last = end.strftime("%H:%M:%S" if end.date() == start.date() else "%Y-%m-%d %H:%M:%S")
    return f"time (UTC), ledger entries from {first} to {last}"


def spend_chart(report: Mapping[str, Any]) -> str:
    """Spend vs budget over time: what is spent (settled and accepted), what is committed
    (spent + open reservations) and the budget, as step lines; x is the ledger time (UTC),
    y the series unit with 4 to 6 nice ticks."""
    series = report["series"]
    unit, points = str(series["unit"]), list(series["points"])
    name = report["dataset"]["name"]
    title = f"Spend vs budget ({unit}) of dataset {name}"
    if not points:
        return _svg(WIDTH, SPEND_HEIGHT, title, "No ledger entries.", [])
    committed = [Decimal(p["spent"]) for p in points]
    spent = [c - Decimal(p.get("reserved", "0")) for c, p in zip(committed, points, strict=True)]
    budget = [Decimal(p["budget"]) for p in points]
    times = [_when(str(p["at"])) for p in points]
    ticks = nice_ticks(max([*committed, *budget, Decimal(0)]))
    labels = tick_labels(ticks)
    left = max(48, CHAR_W * max(len(s) for s in labels) + 16)
    legend, legend_rows = _legend(
        [
            (SPENT_COLOUR, "spent", "", spent[-1], True),
            (COMMITTED_COLOUR, "spent + reserved", "2 2", committed[-1], True),
            (BUDGET_COLOUR, "budget", "6 4", budget[-1], False),
        ],
        unit,
        left,
    )
    plot_top = TOP + 16 * (legend_rows - 1)
    plot_w, plot_h = WIDTH - left - RIGHT, SPEND_HEIGHT - plot_top - BOTTOM
    start = times[0]
    end = max(times[-1], start + timedelta(seconds=1))
    end += (end - start) / 20  # the last value holds a little, so a final step stays visible
    span, top = (end - start).total_seconds(), ticks[-1]

    def x(at: datetime) -> str:
        return _num(left + plot_w * (at - start).total_seconds() / span)

    def y(value: Decimal) -> str:
        return _num(Decimal(plot_top + plot_h) - Decimal(plot_h) * min(value, top) / top)

    def steps(values: Sequence[Decimal], first: Decimal) -> str:
        level = y(first)
        coords = [f"{x(start)},{level}"]
        for at, value in zip(times, values, strict=True):
            coords.append(f"{x(at)},{level}")
            level = y(value)
            coords.append(f"{x(at)},{level}")
        coords.append(f"{x(end)},{level}")
        return " ".join(coords)

    now_spent, now_committed, now_budget = spent[-1], committed[-1], points[-1]["budget"]
    reserved = now_committed - now_spent
    desc = (
        f"{len(points)} points up to ledger entry {points[-1]['seq']}; spent {now_committed} "
        f"of {now_budget} {unit}, of which {reserved} reserved."
    )
    base_y, right_x = plot_top + plot_h, left + plot_w
    body = [
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">'
        f"{_label(title, (WIDTH - left - RIGHT) * 12 // (15 * CHAR_W))}</text>",
    ]
    for tick, label in zip(ticks, labels, strict=True):
        body += [
            f'<line class="grid" x1="{left}" y1="{y(tick)}" x2="{right_x}" y2="{y(tick)}" '
            'stroke="#eaeef2"/>',
            f'<text class="ytick" x="{left - 6}" y="{_num(float(y(tick)) + 4)}" '
            f'text-anchor="end">{text(label)}</text>',
        ]
    time_ticks, time_format = _time_ticks(start, end)
    for at in time_ticks:
        half = CHAR_W * len(_time_label(at, time_format)) / 2
        if not half <= float(x(at)) <= WIDTH - half:
            continue  # its label would not fit in the picture
        body += [
            f'<line x1="{x(at)}" y1="{base_y}" x2="{x(at)}" y2="{base_y + 4}" stroke="#555"/>',
            f'<text class="xtick" x="{x(at)}" y="{base_y + 17}" text-anchor="middle">'
            f"{text(_time_label(at, time_format))}</text>",
        ]
    body += [
        f'<line x1="{left}" y1="{base_y}" x2="{right_x}" y2="{base_y}" stroke="#555"/>',
        f'<line x1="{left}" y1="{plot_top}" x2="{left}" y2="{base_y}" stroke="#555"/>',
        f'<text x="{right_x}" y="{base_y + 36}" text-anchor="end" fill="#555">'
        f"{text(_span_label(start, times[-1]))}</text>",
        f'<polyline class="budget" points="{steps(budget, budget[0])}" fill="none" '
        f'stroke="{BUDGET_COLOUR}" stroke-width="2" stroke-dasharray="6 4"/>',
        f'<polyline class="committed" points="{steps(committed, Decimal(0))}" fill="none" '
        f'stroke="{COMMITTED_COLOUR}" stroke-width="2" stroke-dasharray="2 2"/>',
        f'<polyline class="spent" points="{steps(spent, Decimal(0))}" fill="none" '
        f'stroke="{SPENT_COLOUR}" stroke-width="2.5"/>',
    ]
    body += legend
    return _svg(WIDTH, SPEND_HEIGHT, title, desc, body)


def analysts_chart(report: Mapping[str, Any]) -> str:
    """Per-analyst horizontal bars: net charge in the series unit, with the refunded part
    drawn after it in a lighter colour; the largest :data:`MAX_BARS` spenders. Each bar is
    labelled with both parts by name, so the net charge does not read as the bar's total.

    Outside ``basic`` mode, where the report has attributions, a bar is the analyst's ε
    attribution instead (``attribution``: its charges alone, converted; ``docs/accounting.md``,
    *Attribution*), labelled not certified, and the chart's root has the class
    ``attribution-chart``: the statement the service certifies is an (ε, δ), so every mode
    that charges in another unit (ρ, μ², an RDP curve, a split's sub-budgets) draws the same ε
    the report's tables and the command line give per analyst; the net charge in the mode's
    unit stays in the report's tables. This is the one per-analyst chart: the dashboard inlines
    it rather than drawing its own."""
    unit = str(report["series"]["unit"])
    attributed = report["dataset"]["mode"] != "basic" and (
        not report["guarantee"]["certified"]
        or any(row.get("attribution") for row in report["analysts"])
    )
    symbol = "ε attribution" if attributed else UNIT_SYMBOL.get(unit, unit)

    def spent(row: Mapping[str, Any]) -> Decimal:
        if attributed:
            return Decimal((row.get("attribution") or {}).get("epsilon", "0"))
        return Decimal(row["charged"].get(unit, "0"))

    def back(row: Mapping[str, Any]) -> Decimal:
        return Decimal(0) if attributed else Decimal(row["refunded"].get(unit, "0"))

    rows = sorted(report["analysts"], key=lambda r: (-spent(r), str(r["actor"])))
    shown_rows, hidden = rows[:MAX_BARS], len(rows) - MAX_BARS
    name = report["dataset"]["name"]
    title = (
        f"Attribution per analyst (ε, not certified) of dataset {name}"
        if attributed
        else f"Spend per analyst ({unit}) of dataset {name}"
    )
    height = TOP + max(len(shown_rows), 1) * (BAR_HEIGHT + BAR_GAP) + BOTTOM
    charged = [spent(r) for r in shown_rows]
    refunded = [back(r) for r in shown_rows]
    values = [
        f"ε {shown(c, up=True)} (attribution)"
        if attributed
        else f"net {shown(c, up=True)}, refunded {shown(f, up=False)}"
        for c, f in zip(charged, refunded, strict=True)
    ]
    # the value column is as wide as its longest label, so no label runs off the picture
    margin, label_w = 16, 200
    value_w = 16 + CHAR_W * max((len(v) for v in values), default=0)
    x0 = margin + label_w
    plot_w = WIDTH - x0 - value_w - RIGHT
    ticks = nice_ticks(max([c + f for c, f in zip(charged, refunded, strict=True)] + [Decimal(0)]))
    top = ticks[-1]
    base_y = height - BOTTOM + 8
    body = [
        f'<text x="{margin}" y="22" font-size="15" font-weight="bold">'
        f"{_label(title, (WIDTH - margin - RIGHT) * 12 // (15 * CHAR_W))}</text>",
        f'<rect x="{margin}" y="34" width="14" height="10" fill="{SPENT_COLOUR}"/>',
        f'<text x="{margin + 20}" y="43">'
        + (
            "the analyst's charges alone as (ε, δ): shares do not add up"
            if attributed
            else "net charge (open reservations included)"
        )
        + "</text>",
    ]
    if not attributed:
        body += [
            f'<rect x="{margin + 300}" y="34" width="14" height="10" fill="{REFUND_COLOUR}"/>',
            f'<text x="{margin + 320}" y="43">refunded</text>',
        ]
    if not shown_rows:
        body.append(f'<text x="{margin}" y="{TOP + 16}">No invocations yet.</text>')
    for tick, label in zip(ticks, tick_labels(ticks), strict=True):
        tx = _num(x0 + plot_w * tick / top)
        body += [
            f'<line class="grid" x1="{tx}" y1="{TOP - 4}" x2="{tx}" y2="{base_y}" '
            'stroke="#eaeef2"/>',
            f'<text class="xtick" x="{tx}" y="{base_y + 16}" text-anchor="middle">'
            f"{text(label)}</text>",
        ]
    body.append(
        f'<text x="{_num(x0 + plot_w)}" y="{base_y + 32}" text-anchor="end" fill="#555">'
        f"{text(symbol)}</text>"
    )
    for i, row in enumerate(shown_rows):
        y = TOP + i * (BAR_HEIGHT + BAR_GAP)
        w_charged = Decimal(plot_w) * max(charged[i], Decimal(0)) / top
        w_refund = Decimal(plot_w) * refunded[i] / top
        who = row["name"] or row["actor"]
        if attributed:
            share = row.get("attribution") or {}
            about = (
                f"ε {share.get('epsilon', '0')}, δ {share.get('delta', '0')} attributed "
                "(not certified)"
            )
        else:
            net, out = row["charged"].get(unit, "0"), row["refunded"].get(unit, "0")
            about = f"net charge {net}, refunded {out} {unit}"
        body += [
            f'<g class="analyst"><title>{text(who)} ({text(row["actor"])}): {text(about)}, '
            f"rejected {int(row['rejected'])}</title>",
            f'<text x="{x0 - 8}" y="{y + 15}" text-anchor="end">{_label(who, 28)}</text>',
            f'<rect x="{x0}" y="{y}" width="{_num(w_charged)}" height="{BAR_HEIGHT}" '
            f'fill="{SPENT_COLOUR}"/>',
            f'<rect x="{_num(x0 + w_charged)}" y="{y}" width="{_num(w_refund)}" '
            f'height="{BAR_HEIGHT}" fill="{REFUND_COLOUR}"/>',
            f'<text x="{x0 + plot_w + 8}" y="{y + 15}">{text(values[i])}</text></g>',
        ]
    if hidden > 0:
        body.append(f'<text x="{x0}" y="{height - 6}">… and {hidden} more analysts</text>')
    desc = f"{len(rows)} analysts; " + (
        "ε attributed to each (its charges alone), not certified."
        if attributed
        else f"net charge and refunds in {unit}."
    )
    return _svg(WIDTH, height, title, desc, body, "attribution-chart" if attributed else "")
