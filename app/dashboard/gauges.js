// One reading to quote and the gauges: a budget's certified reading, what is left, how many
// more fit, and the bar and numbers of what its filter counts.

import { READING_DIGITS, UNIT } from "./amounts.js";

const LEFT_UNIT = { epsilon: "ε", delta: "δ", rho: "ρ", mu_squared: "μ²", rdp: "RDP" };

// ------------------------------------------------------------------ one reading to quote
// The certified reading as shown: the summary's guarantee (the odometer reading rounded up
// to READING_DIGITS significant digits by the API: a larger ε or δ is still a guarantee) or,
// where a status has no summary (a sub-budget, a run of blocks), its shown.reading, rounded
// up the same way by the API. The exact reading is on hover.
export function readingNode(odometer, guarantee, cls, given) {
  const el = document.createElement("span");
  el.className = `reading-value ${cls || "g-odometer"}`;
  const g = guarantee || given;
  el.textContent = g ? `ε ${g.epsilon}, δ ${g.delta}` : "no certified reading";
  el.title = odometer ? `ε ${odometer.epsilon}, δ ${odometer.delta}`
    : `rounded up to ${READING_DIGITS} significant digits`;
  return el;
}

// What is left, from summary.left: in the mode's own unit, rounded down by the API.
function leftNode(items, percents) {
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
      + ` of ${item.budget} (${percents[i] || item.fraction})`;
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
  const part = (cls, word, value, text) => {
    const span = document.createElement("span");
    span.className = cls;
    span.dataset.exact = value;
    span.title = `${word} ${value} ${of} (exact)`;
    span.textContent = `${word} ${text}`;
    return span;
  };
  const given = summary.shown || {}; // the API's percentages (Summary.shown)
  p.append(part("fraction-spent", "spent", summary.fraction_spent, given.fraction_spent), " · ",
    part("fraction-left", "left", summary.fraction_left, given.fraction_left), ` ${of}`);
  return p;
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
  reading.append(label, " ", readingNode(odometer, summary && summary.guarantee, opts.cls,
    opts.reading));
  box.appendChild(reading);
  if (summary && summary.fraction_spent != null && summary.fraction_left != null) {
    box.appendChild(fractionsNode(summary, opts.of || "of the budget"));
  }
  if (summary && Array.isArray(summary.left) && summary.left.length) {
    box.appendChild(leftNode(summary.left, (summary.shown || {}).left || []));
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
  // what remains of the estimate is the API's (status.shown.counted), never subtracted here
  return ["epsilon", status.spent_eps_delta.epsilon, "0", null, status.budget.epsilon];
}

// What the secondary line of numbers is, per mode.
const COUNTED = { basic: "Counted in ε:", zcdp: "Counted in ρ (zCDP):", gdp: "Counted in μ² (GDP):",
  rdp: "(ε, δ) estimate, not certified:" };

// Whether an rdp status's (ε, δ) estimate (spent_eps_delta: the running curve's RDP
// conversion) is above its certified reading, as it is when the reading comes from the PLD
// branch (accounting 1.6.0): compared exactly by the API (status.shown.estimate_above).
export function estimateAbove(status) {
  return Boolean(status && status.shown && status.shown.estimate_above);
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
// run of blocks). The bar is the one fraction spent (the API's: in the unit the mode's
// filter counts; an rdp budget is a curve, its bar the order with the most left), a basic
// budget's reserved ε drawn as its own part of it; the numbers are what the filter counts.
function barAndNumbers(status, leftItems, fraction) {
  const nodes = [];
  const [, spent, reserved, , budget] = measure(status);
  const given = status.shown || {};
  const counted = given.counted;
  const share = fraction != null ? String(fraction) : given.fraction_spent_exact;
  if (share != null) {
    const held = status.mode === "basic" ? Math.min(Number(reserved) / Number(budget) || 0,
      Number(share)) : 0;
    const bar = barNode(1, [["spent", Number(share) - held], ["reserved", held]]);
    const rdpLeft = status.mode === "rdp" && (leftItems || []).find((i) => i.unit === "rdp");
    bar.title = `${given.fraction_spent} of the budget spent`
      + (rdpLeft && rdpLeft.order ? ` (RDP at order ${rdpLeft.order})` : "");
    bar.dataset.fraction = share;
    nodes.push(bar);
  } else {
    nodes.push(barNode(budget, [["spent", spent], ["reserved", reserved]]));
  }
  if (estimateAbove({ shown: given })) {
    nodes.push(estimateAboveNote(status));
    return nodes;
  }
  if (!counted) return nodes;
  const sym = UNIT[counted.unit];
  const numbers = document.createElement("p");
  numbers.className = "numbers";
  const label = document.createElement("span");
  label.className = "numbers-label";
  label.textContent = COUNTED[status.mode] || "Counted:";
  numbers.appendChild(label);
  const remaining = counted.remaining_exact; // rdp: worked out by the API, not here
  const parts = [
    ["spent", "spent", spent], ["reserved", "reserved", reserved],
    ["remaining", "remaining", remaining], ["budget", "of", budget],
  ];
  for (const [cls, word, value] of parts) {
    const span = document.createElement("span");
    span.className = `g-${cls}`;
    if (value != null) {
      span.dataset.exact = value;
      span.title = `${word} ${sym} ${value} (exact)`;
    }
    // rounded by the API (status.shown.counted): spent and reserved up, the rest down
    span.textContent = `${word} ${sym} ${counted[cls]}`;
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
  const given = status.shown || {};
  box.appendChild(readingBlock(summary, status.odometer, { reading: given.reading }));
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
    const subShown = given.sub_budgets && given.sub_budgets[name];
    if (sub.odometer) {
      head.appendChild(readingNode(sub.odometer, null, "g-sub-odometer",
        subShown && subShown.reading));
    }
    part.appendChild(head);
    const items = summary && summary.left ? summary.left.filter((i) => i.sub_budget === name)
      : [];
    part.append(...barAndNumbers({ ...sub, shown: subShown }, items));
    box.appendChild(part);
  }
  return box;
}
