// One reading to quote and the gauges: a budget's certified reading, what is left, how many
// more fit, and the bar and numbers of what its filter counts.

import { formatDec, minus, parseDec, READING_DIGITS, shown, UNIT } from "./amounts.js";

const LEFT_UNIT = { epsilon: "ε", delta: "δ", rho: "ρ", mu_squared: "μ²", rdp: "RDP" };

// ------------------------------------------------------------------ one reading to quote
// The certified reading as shown: the summary's guarantee (the odometer reading rounded up
// to READING_DIGITS significant digits: a larger ε or δ is still a guarantee) or, where a
// status has no summary (a sub-budget, a run of blocks), its odometer rounded up the same
// way. The exact reading is on hover.
export function readingNode(odometer, guarantee, cls) {
  const el = document.createElement("span");
  el.className = `reading-value ${cls || "g-odometer"}`;
  const g = guarantee || (odometer && {
    epsilon: shown(odometer.epsilon, true, READING_DIGITS),
    delta: shown(odometer.delta, true, READING_DIGITS),
  });
  el.textContent = g ? `ε ${g.epsilon}, δ ${g.delta}` : "no certified reading";
  el.title = odometer ? `ε ${odometer.epsilon}, δ ${odometer.delta}`
    : `rounded up to ${READING_DIGITS} significant digits`;
  return el;
}

// fraction (0 … 1, a decimal string) as a percentage: "48.48 %"
export function percentText(fraction) {
  const d = parseDec(fraction);
  if (d === null) return "";
  return `${d.digits === "0" ? "0" : shown(formatDec({ ...d, exp: d.exp + 2 }), false)} %`;
}

// What is left, from summary.left: in the mode's own unit, rounded down by the API.
function leftNode(items) {
  const p = document.createElement("p");
  p.className = "left";
  const label = document.createElement("span");
  label.className = "left-label";
  label.textContent = "left";
  p.appendChild(label);
  items.forEach((item, i) => {
    if (i) p.append(" · ");
    const span = document.createElement("span");
    span.className = "left-item";
    span.dataset.unit = item.unit;
    span.dataset.amount = item.amount;
    const sub = item.sub_budget ? `${item.sub_budget}: ` : "";
    const where = item.order ? ` at order ${item.order}` : "";
    span.textContent = `${sub}${LEFT_UNIT[item.unit] || item.unit} ${item.amount}${where}`
      + ` of ${item.budget} (${percentText(item.fraction)})`;
    span.title = "what is left, rounded down to 8 significant digits"
      + (item.unit === "rdp" ? " (an RDP budget is a curve: the order with the largest"
        + " share of its threshold left)" : "");
    p.appendChild(span);
  });
  return p;
}

// The one fraction of a budget spent and what is left of it (summary.fraction_spent and
// fraction_left, which add up to 1: docs/accounting.md, One fraction per budget), as
// percentages; the exact fractions are on the spans.
function fractionsNode(summary, of) {
  const p = document.createElement("p");
  p.className = "fractions";
  const part = (cls, word, value) => {
    const span = document.createElement("span");
    span.className = cls;
    span.dataset.exact = value;
    span.title = `${word} ${value} ${of} (exact)`;
    span.textContent = `${word} ${percentText(value)}`;
    return span;
  };
  p.append(part("fraction-spent", "spent", summary.fraction_spent), " · ",
    part("fraction-left", "left", summary.fraction_left), ` ${of}`);
  return p;
}

// The share of a budget spent that a bar draws: the API's one fraction (a summary's
// fraction_spent, a run of blocks' fraction_spent) or, for a split's sub-budget, 1 − the
// least left of its bounds (summary.left[].fraction: each is 1 − that bound's spent; a bound
// of no budget counts for nothing, no live RDP order for all).
export function spentShare(fraction, leftItems) {
  if (fraction != null) return String(fraction);
  const items = leftItems || [];
  const live = items.filter((i) => Number(i.budget) > 0);
  if (!live.length) return items.length ? "1" : null;
  const least = live.reduce((a, i) => (Number(i.fraction) < Number(a) ? i.fraction : a), "1");
  return minus("1", least);
}

// "N more like the last": how many more of the last declaration the budget admits.
function moreNode(more) {
  const p = document.createElement("p");
  p.className = more.count === 0 ? "more none" : "more";
  const kind = more.of && more.of.type ? more.of.type : "declaration";
  const n = more.count;
  p.textContent = `${more.at_least ? "at least " : ""}${n} more ${kind} like the last `
    + `${n === 1 ? "fits" : "fit"}${more.sub_budget ? ` (sub-budget ${more.sub_budget})` : ""}`;
  p.title = `counted by the dataset's filter: ${JSON.stringify(more.of)}`;
  return p;
}

// A budget's reading: the summary's text first (the sentence to quote), the certified
// guarantee prominently, what is left and how many more of the last declaration fit.
export function readingBlock(summary, odometer, options) {
  const opts = options || {};
  const box = document.createElement("div");
  box.className = "reading-box";
  if (summary && summary.text) {
    const text = document.createElement("p");
    text.className = "summary-text";
    text.textContent = summary.text;
    box.appendChild(text);
  }
  const reading = document.createElement("p");
  reading.className = "reading";
  const label = document.createElement("span");
  label.className = "reading-label";
  label.textContent = opts.label || "Certified reading to quote";
  reading.append(label, " ", readingNode(odometer, summary && summary.guarantee, opts.cls));
  box.appendChild(reading);
  if (summary && summary.fraction_spent != null && summary.fraction_left != null) {
    box.appendChild(fractionsNode(summary, opts.of || "of the budget"));
  }
  if (summary && Array.isArray(summary.left) && summary.left.length) {
    box.appendChild(leftNode(summary.left));
  }
  if (summary && summary.more) box.appendChild(moreNode(summary.more));
  return box;
}

// ------------------------------------------------------------------ gauges
// The gauge of one leaf status, in the mode's own unit: [unit, spent, reserved, remaining,
// budget]; rdp counts in its (ε, δ) estimate (what remains is budget − estimate).
export function measure(status) {
  const mode = status.mode;
  if (mode === "basic") {
    return ["epsilon", status.spent.epsilon, status.reserved.epsilon,
      status.remaining.epsilon, status.budget.epsilon];
  }
  if (mode === "zcdp") {
    return ["rho", status.spent.rho, "0", status.remaining.rho, status.rho_budget];
  }
  if (mode === "gdp") {
    return ["mu_squared", status.spent.mu_squared, "0", status.remaining.mu_squared,
      status.mu_squared_budget];
  }
  const spent = status.spent_eps_delta.epsilon;
  return ["epsilon", spent, "0", minus(status.budget.epsilon, spent), status.budget.epsilon];
}

// What the secondary line of numbers is, per mode.
const COUNTED = { basic: "Counted in ε:", zcdp: "Counted in ρ (zCDP):", gdp: "Counted in μ² (GDP):",
  rdp: "(ε, δ) estimate, not certified:" };

// Whether an rdp status's (ε, δ) estimate (spent_eps_delta: the running curve's RDP
// conversion) is above its certified reading, as it is when the reading comes from the PLD
// branch (accounting 1.6.0; the MNIST tutorial's job reads ε 2.4081583 where the conversion
// says 2.525): compared exactly, on the decimal strings.
export function estimateAbove(status) {
  if (status.mode !== "rdp" || !status.odometer || !status.spent_eps_delta) return false;
  const over = minus(status.spent_eps_delta.epsilon, status.odometer.epsilon);
  return over !== null && over !== "0";
}

// In place of an estimate above the certified reading: no number, what it is and why it is
// not shown (an uncertified ε above the one to quote would only mislead); what is left and
// admitted is the "left" line above, which counts the statement with more left.
function estimateAboveNote(status) {
  const note = document.createElement("p");
  note.className = "numbers estimate-above";
  note.dataset.exact = status.spent_eps_delta.epsilon;
  note.textContent = "The running curve's RDP conversion (an estimate, not certified) is above "
    + "the certified reading, so it is not shown: quote the certified reading; what is left is "
    + "the left line above.";
  return note;
}

// A gauge's bar: each part ([class, amount]) as its share of total (floats size bars only).
export function barNode(total, parts) {
  const bar = document.createElement("div");
  bar.className = "bar";
  const whole = Number(total) || 1;
  for (const [cls, value] of parts) {
    const part = document.createElement("span");
    part.className = cls;
    part.style.width = `${Math.min(100, (100 * Number(value)) / whole)}%`;
    bar.appendChild(part);
  }
  return bar;
}

// The bar and the secondary numbers of one leaf status (a whole dataset, a sub-budget, a
// run of blocks). The bar is the one fraction spent (spentShare: in the unit the mode's
// filter counts; an rdp budget is a curve, its bar the order with the most left), a basic
// budget's reserved ε drawn as its own part of it; the numbers are what the filter counts.
function barAndNumbers(status, leftItems, fraction) {
  const nodes = [];
  const [unit, spent, reserved, remaining, budget] = measure(status);
  const sym = UNIT[unit];
  const share = spentShare(fraction, leftItems);
  if (share !== null) {
    const held = status.mode === "basic" ? Math.min(Number(reserved) / Number(budget) || 0,
      Number(share)) : 0;
    const bar = barNode(1, [["spent", Number(share) - held], ["reserved", held]]);
    const rdpLeft = status.mode === "rdp" && (leftItems || []).find((i) => i.unit === "rdp");
    bar.title = `${percentText(share)} of the budget spent`
      + (rdpLeft && rdpLeft.order ? ` (RDP at order ${rdpLeft.order})` : "");
    bar.dataset.fraction = share;
    nodes.push(bar);
  } else {
    nodes.push(barNode(budget, [["spent", spent], ["reserved", reserved]]));
  }
  if (estimateAbove(status)) {
    nodes.push(estimateAboveNote(status));
    return nodes;
  }
  const numbers = document.createElement("p");
  numbers.className = "numbers";
  const label = document.createElement("span");
  label.className = "numbers-label";
  label.textContent = COUNTED[status.mode] || "Counted:";
  numbers.appendChild(label);
  const parts = [
    ["spent", "spent", spent, true], ["reserved", "reserved", reserved, true],
    ["remaining", "remaining", remaining, false], ["budget", "of", budget, false],
  ];
  for (const [cls, word, value, up] of parts) {
    const span = document.createElement("span");
    span.className = `g-${cls}`;
    span.dataset.exact = value;
    span.title = `${word} ${sym} ${value} (exact)`;
    span.textContent = `${word} ${sym} ${shown(value, up)}`;
    numbers.appendChild(span);
  }
  nodes.push(numbers);
  return nodes;
}

// A dataset's (or a run's) gauge: its reading to quote first, then what its filter counts.
// A split dataset's sub-budgets follow, each with its bar, its numbers and its own part of
// the reading (the dataset's reading is their sum).
export function gaugeFor(status, label, fraction) {
  const box = document.createElement("div");
  box.className = "gauge";
  if (!status || !status.mode) {
    box.textContent = "unreadable (see the replay verification)";
    return box;
  }
  if (label) {
    const head = document.createElement("div");
    head.className = "gauge-label";
    head.textContent = label;
    box.appendChild(head);
  }
  const summary = status.summary || null;
  box.appendChild(readingBlock(summary, status.odometer));
  if (status.mode !== "split") {
    box.append(...barAndNumbers(status, summary && summary.left,
      summary ? summary.fraction_spent : fraction));
    return box;
  }
  for (const [name, sub] of Object.entries(status.sub_budgets || {})) {
    const part = document.createElement("div");
    part.className = "sub-gauge";
    part.dataset.sub = name;
    const head = document.createElement("div");
    head.className = "gauge-label";
    head.append(`sub-budget ${name} (${sub.mode}): its part of the reading `);
    if (sub.odometer) head.appendChild(readingNode(sub.odometer, null, "g-sub-odometer"));
    part.appendChild(head);
    const items = summary && summary.left ? summary.left.filter((i) => i.sub_budget === name)
      : [];
    part.append(...barAndNumbers(sub, items));
    box.appendChild(part);
  }
  return box;
}
