// Privacy odometer dashboard: read-only, vanilla JS, no inline script (see the page's CSP).
// Every value from the server is written with textContent; the SVG charts are parsed as XML,
// stripped of anything active and imported as nodes, never assigned as HTML (the page's own
// chart is built node by node).
// Every budget leads with ONE reading to quote: the status summary's text and its certified
// guarantee (status.summary: the odometer reading rounded up to 8 significant digits, what is
// left rounded down), shown as the API gives them. Other amounts are exact decimal strings
// from the API, shown rounded to DIGITS significant digits in the direction that never
// flatters (spent and reserved up, budgets and what remains down), with the exact string in
// the element's title; no amount is ever added up in floating point (floats only size bars).
"use strict";

(function () {
  const KEY = "odometer.apiKey";
  const PAGE = 20;
  const DIGITS = 6;
  const READING_DIGITS = 8; // the summary's: a reading rounded up, what is left rounded down
  const MAX_GRANT_READS = 50; // the organisation view reads the grants of this many datasets
  const MAX_REPORTS = 20; // an auditor's home reads this many reports (3 at a time)
  const SVG_NS = "http://www.w3.org/2000/svg";
  const UNIT = { epsilon: "ε", rho: "ρ", mu_squared: "μ²", delta: "δ" }; // the order shown
  const LEFT_UNIT = { epsilon: "ε", delta: "δ", rho: "ρ", mu_squared: "μ²", rdp: "RDP" };
  const KINDS = ["dataset_created", "budget_changed", "grant_changed", "invocation_accepted",
    "invocation_reserved", "invocation_rejected", "invocation_settled", "invocation_cancelled",
    "blocks_opened", "blocks_retired"];
  const params = new URLSearchParams(window.location.search);
  // the open dataset's status is read again every POLL_MS (/dashboard?poll=MS: 250 … 600000)
  const POLL_MS = Math.min(600_000, Math.max(250,
    parseInt(params.get("poll") || "5000", 10) || 5000));
  const $ = (id) => document.getElementById(id);
  const state = { names: {}, dataset: null, head: 0, cursors: [], after: 0, next: null,
    reportReadable: false, me: null, role: null, datasets: [], orgNames: {}, reportKey: null,
    homeToken: 0 };

  // ------------------------------------------------------------------ exact decimal strings
  function parseDec(text) {
    const m = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(String(text).trim());
    if (!m || (m[2] === "" && !m[3])) return null;
    const frac = m[3] || "";
    let digits = (m[2] + frac).replace(/^0+/, "");
    let exp = parseInt(m[4] || "0", 10) - frac.length;
    if (digits === "") return { neg: false, digits: "0", exp: 0 };
    while (digits.endsWith("0")) { digits = digits.slice(0, -1); exp += 1; }
    return { neg: m[1] === "-", digits, exp };
  }

  function formatDec(d) {
    if (d.digits === "0") return "0";
    const sign = d.neg ? "-" : "";
    const adjusted = d.digits.length - 1 + d.exp;
    if (adjusted >= -7 && adjusted < 15) {
      if (d.exp >= 0) return sign + d.digits + "0".repeat(d.exp);
      const point = d.digits.length + d.exp;
      if (point > 0) return sign + d.digits.slice(0, point) + "." + d.digits.slice(point);
      return sign + "0." + "0".repeat(-point) + d.digits;
    }
    const rest = d.digits.slice(1);
    return `${sign}${d.digits[0]}${rest ? "." + rest : ""}e${adjusted >= 0 ? "+" : ""}${adjusted}`;
  }

  // At most `digits` (DIGITS) significant digits, towards +∞ (up) or −∞ (down): never
  // flattering.
  function shown(text, up, significant) {
    const keep = significant || DIGITS;
    const d = parseDec(text);
    if (d === null) return String(text);
    if (d.digits.length <= keep) return formatDec(d);
    const dropped = d.digits.slice(keep);
    let kept = BigInt(d.digits.slice(0, keep));
    if (/[1-9]/.test(dropped) && up !== d.neg) kept += 1n;
    let digits = kept.toString();
    let exp = d.exp + dropped.length;
    while (digits.endsWith("0")) { digits = digits.slice(0, -1); exp += 1; }
    return formatDec({ neg: d.neg, digits, exp });
  }

  // a − b exactly (the rdp mode's ε estimate of what remains; a basic cap's reading less its
  // reservations), never below zero.
  function minus(a, b) {
    const x = parseDec(a), y = parseDec(b);
    if (x === null || y === null) return null;
    const e = Math.min(x.exp, y.exp);
    const big = (d) => (d.neg ? -1n : 1n) * BigInt(d.digits) * 10n ** BigInt(d.exp - e);
    let diff = big(x) - big(y);
    if (diff < 0n) diff = 0n;
    return diff === 0n ? "0" : formatDec(parseDec(`${diff}e${e}`));
  }

  function amountText(obj, up) {
    if (!obj || typeof obj !== "object") return "";
    return Object.keys(UNIT).filter((k) => typeof obj[k] === "string" || typeof obj[k] === "number")
      .map((k) => `${UNIT[k]} ${shown(obj[k], up)}`).join(", ");
  }

  function exactText(obj) {
    if (!obj || typeof obj !== "object") return "";
    return Object.keys(UNIT).filter((k) => obj[k] != null && typeof obj[k] !== "object")
      .map((k) => `${UNIT[k]} ${obj[k]}`).join(", ");
  }

  // An element showing an amount rounded, with the exact value on hover.
  function amountNode(tag, obj, up, cls) {
    const el = document.createElement(tag);
    el.textContent = amountText(obj, up);
    el.title = exactText(obj);
    if (cls) el.className = cls;
    return el;
  }

  // ------------------------------------------------------------------ HTTP
  function say(text) { $("message").textContent = text || ""; }

  class HttpError extends Error {
    constructor(status, body) {
      super(`${status} ${body && body.error ? body.error + ": " + body.detail : ""}`);
      this.status = status;
    }
  }

  // GET path; with a payload, POST it as JSON (the only write the page makes is a question:
  // how many more a cap admits).
  async function api(path, accept, payload) {
    const key = sessionStorage.getItem(KEY);
    const init = {
      headers: { Authorization: `Bearer ${key}`, Accept: accept || "application/json" },
      credentials: "omit",
      cache: "no-store",
    };
    if (payload !== undefined) {
      init.method = "POST";
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    const response = await fetch(path, init);
    if (!response.ok) {
      let body = null;
      try { body = await response.json(); } catch (e) { body = null; }
      throw new HttpError(response.status, body);
    }
    return accept && accept !== "application/json" ? response.text() : response.json();
  }

  function explain(err) {
    if (err.status === 401) return "The key was refused (unknown, revoked or expired).";
    if (err.status === 403) return "This key's role may not read reports and ledgers (curator or auditor needed).";
    if (err.status === 404) return "Not found (or not visible to this key).";
    if (err.status === 422) return `The filter was refused: ${err.message}`;
    return `Request failed: ${err.message}`;
  }

  function cell(row, text, cls) {
    const td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  function nameOf(id) {
    const name = state.names[id];
    return name ? name : id;
  }

  // ------------------------------------------------------------------ one reading to quote
  // The certified reading as shown: the summary's guarantee (the odometer reading rounded up
  // to READING_DIGITS significant digits: a larger ε or δ is still a guarantee) or, where a
  // status has no summary (a sub-budget, a run of blocks, an organisation's cap), its
  // odometer rounded up the same way. The exact reading is on hover.
  function readingNode(odometer, guarantee, cls) {
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
  function percentText(fraction) {
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
  function readingBlock(summary, odometer, options) {
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
    if (summary && Array.isArray(summary.left) && summary.left.length) {
      box.appendChild(leftNode(summary.left));
    }
    if (summary && summary.more) box.appendChild(moreNode(summary.more));
    return box;
  }

  // ------------------------------------------------------------------ gauges
  // The gauge of one leaf status, in the mode's own unit: [unit, spent, reserved, remaining,
  // budget]; rdp counts in its (ε, δ) estimate (what remains is budget − estimate).
  function measure(status) {
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

  // A gauge's bar: each part ([class, amount]) as its share of total (floats size bars only).
  function barNode(total, parts) {
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
  // run of blocks). An rdp budget is a curve: its bar is the share used of the order with the
  // most left (summary.left), its numbers the (ε, δ) estimate, labelled so.
  function barAndNumbers(status, leftItems) {
    const nodes = [];
    const [unit, spent, reserved, remaining, budget] = measure(status);
    const sym = UNIT[unit];
    const rdpLeft = status.mode === "rdp" && (leftItems || []).find((i) => i.unit === "rdp");
    if (rdpLeft) {
      const used = Math.max(0, 1 - Number(rdpLeft.fraction));
      const bar = barNode(1, [["spent", used]]);
      bar.title = `RDP used at order ${rdpLeft.order}: ${percentText(String(used.toFixed(4)))}`;
      nodes.push(bar);
    } else {
      nodes.push(barNode(budget, [["spent", spent], ["reserved", reserved]]));
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
  function gaugeFor(status, label) {
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
      box.append(...barAndNumbers(status, summary && summary.left));
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

  // ------------------------------------------------------------------ partitioned datasets
  // A partitioned dataset has one filter per block (a day, week or month, a hash bucket, a
  // named part), so no whole-dataset gauge: its list row says how many blocks are open and
  // the highest fraction any block has spent, and its detail draws the blocks as a heat strip
  // from GET /v1/datasets/{id}/blocks (runs of consecutive blocks with one history, paged by
  // the "next" key). A cell is one block, or (when a page holds more than MAX_CELLS blocks)
  // neighbouring blocks drawn as one, shaded by the highest fraction among them.
  const MAX_CELLS = 400;
  // runs a page (GET …/blocks?limit=); /dashboard?runs=N asks for N (1 … 1000) instead
  const RUNS_PAGE = Math.min(1000, Math.max(1,
    parseInt(new URLSearchParams(window.location.search).get("runs") || "200", 10) || 200));
  const DAY_MS = 86_400_000;
  const EPOCH_MONDAY = Date.UTC(1969, 11, 29); // the Monday of block 0's ISO week
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
    "Nov", "Dec"];
  const MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July",
    "August", "September", "October", "November", "December"];
  // shade k: fraction = 0, ≤ ¼, ≤ ½, ≤ ¾, < 1, = 1 (the block's budget spent out)
  const SHADES = ["0 (unspent)", "≤ 0.25", "≤ 0.5", "≤ 0.75", "< 1", "1 (spent out)"];
  const KIND_WORDS = { day: "by day", week: "by ISO week", month: "by month",
    bucket: "hash buckets", named: "named parts" };
  const blockState = { ds: null, partition: null, from: "", to: "", prev: [], next: null,
    runs: [], token: 0 };

  const pad2 = (n) => String(n).padStart(2, "0");

  // A block key's index, as the server numbers blocks (odometer_core.partition); null when it
  // is not a key of this partition (the server then says why).
  function blockIndex(partition, key) {
    const text = String(key).trim();
    const kind = partition.kind;
    let m;
    if (kind === "bucket") return /^\d+$/.test(text) ? Number(text) : null;
    if (kind === "named") {
      const i = (partition.names || []).indexOf(text);
      return i < 0 ? null : i;
    }
    if (kind === "day" && (m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text))) {
      return Math.round(Date.UTC(+m[1], +m[2] - 1, +m[3]) / DAY_MS);
    }
    if (kind === "week" && (m = /^(\d{4})-W(\d{2})$/.exec(text))) {
      const jan4 = Date.UTC(+m[1], 0, 4);
      const monday = jan4 - ((new Date(jan4).getUTCDay() + 6) % 7) * DAY_MS;
      return Math.round((monday + (+m[2] - 1) * 7 * DAY_MS - EPOCH_MONDAY) / (7 * DAY_MS));
    }
    if (kind === "month" && (m = /^(\d{4})-(\d{2})$/.exec(text))) {
      return (+m[1] - 1970) * 12 + (+m[2] - 1);
    }
    return null;
  }

  function dayOf(index) { return new Date(index * DAY_MS); }

  // The key of block ``index`` (the inverse of blockIndex).
  function blockKey(partition, index) {
    const kind = partition.kind;
    if (kind === "bucket") return String(index);
    if (kind === "named") return (partition.names || [])[index] || `#${index}`;
    if (kind === "day") {
      const d = dayOf(index);
      return `${d.getUTCFullYear()}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}`;
    }
    if (kind === "week") {
      const thursday = EPOCH_MONDAY + index * 7 * DAY_MS + 3 * DAY_MS;
      const year = new Date(thursday).getUTCFullYear();
      const week = Math.floor((thursday - Date.UTC(year, 0, 1)) / (7 * DAY_MS)) + 1;
      return `${year}-W${pad2(week)}`;
    }
    return `${1970 + Math.floor(index / 12)}-${pad2((index % 12) + 1)}`;
  }

  const exceeds = (a, b) => minus(a, b) !== "0"; // a > b, exactly

  function shadeOf(fraction) {
    const d = parseDec(fraction);
    if (d === null || d.digits === "0" || d.neg) return 0;
    if (!exceeds("1", fraction)) return 5;
    if (!exceeds(fraction, "0.25")) return 1;
    if (!exceeds(fraction, "0.5")) return 2;
    if (!exceeds(fraction, "0.75")) return 3;
    return 4;
  }

  // A fraction as text: rounded up (it is spent), and as a percentage.
  function fractionText(fraction) {
    const d = parseDec(fraction);
    if (d === null) return String(fraction);
    const percent = d.digits === "0" ? "0" : shown(formatDec({ ...d, exp: d.exp + 2 }), true);
    return `${shown(fraction, true)} (${percent}%)`;
  }

  function partitionText(partition) {
    const words = [KIND_WORDS[partition.kind] || partition.kind];
    if (partition.timezone) words.push(`in ${partition.timezone}`);
    if (partition.kind === "bucket" && partition.buckets) words.push(`(${partition.buckets})`);
    if (partition.kind === "named" && partition.names) words.push(`(${partition.names.length})`);
    return `${words.join(" ")}, unit ${partition.unit}`;
  }

  function swatch(fraction) {
    const s = document.createElement("span");
    s.className = `swatch f${shadeOf(fraction)}`;
    s.setAttribute("aria-hidden", "true");
    return s;
  }

  // The list row's and the detail's summary of a partitioned dataset: no spent bar (there is
  // no whole-dataset spend), but the blocks open and the highest fraction spent by any.
  function blocksSummary(ds) {
    const status = ds.status || {};
    const blocks = status.blocks || {};
    const box = document.createElement("div");
    box.className = "blocks-summary";
    const head = document.createElement("p");
    head.className = "bs-head";
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.textContent = "partitioned";
    head.append(badge, ` ${partitionText(ds.partition || { kind: "?", unit: blocks.unit })}`);
    box.appendChild(head);
    const numbers = document.createElement("p");
    numbers.className = "numbers";
    const open = document.createElement("span");
    open.className = "bs-open";
    const n = blocks.open || 0;
    open.textContent = `${n} block${n === 1 ? "" : "s"} open`;
    open.title = (blocks.opened || []).map((r) => `${r.from} … ${r.to} (${r.blocks})`).join(", ");
    numbers.appendChild(open);
    const highest = document.createElement("span");
    highest.className = "bs-highest";
    const top = blocks.highest_fraction_spent != null ? String(blocks.highest_fraction_spent) : "0";
    highest.dataset.exact = top;
    highest.title = `highest fraction of a block's budget spent: ${top} (exact)`;
    highest.append(swatch(top), `highest block spent ${fractionText(top)} of its budget`);
    numbers.appendChild(highest);
    const budget = document.createElement("span");
    budget.className = "bs-budget";
    budget.append("each block's budget ");
    budget.appendChild(amountNode("span", status.budget, false));
    if (status.mode) budget.append(` (${status.mode})`);
    numbers.appendChild(budget);
    box.appendChild(numbers);
    if (status.odometer || status.summary) {
      // the highest reading over every block ever opened, retired ones included (the
      // summary's text says so; what is left is the most spent open block's)
      box.insertBefore(readingBlock(status.summary, status.odometer,
        { label: "Certified reading to quote (every block ever opened)" }), head.nextSibling);
    }
    return box;
  }

  function setBlockInputs(partition) {
    const types = { day: "date", week: "week", month: "month", bucket: "number" };
    const examples = { day: "2026-11-27", week: "2026-W48", month: "2026-11", bucket: "17" };
    const names = $("b-names");
    names.replaceChildren();
    for (const id of ["b-from", "b-to"]) {
      const input = $(id);
      input.type = types[partition.kind] || "text";
      input.value = "";
      input.placeholder = examples[partition.kind] || (partition.names || [""])[0];
      input.removeAttribute("list");
      if (partition.kind === "bucket") {
        input.min = "0";
        if (partition.buckets) input.max = String(partition.buckets - 1);
      }
      if (partition.kind === "named") input.setAttribute("list", "b-names");
    }
    for (const name of partition.kind === "named" ? (partition.names || []).slice(0, 1000) : []) {
      names.appendChild(new Option(name));
    }
  }

  function showBlocksHeader(ds) {
    const status = ds.status || {};
    const blocks = status.blocks || {};
    const partition = ds.partition;
    const line = $("blocks-partition");
    line.replaceChildren(`Partition: ${partitionText(partition)}. `,
      `${blocks.open || 0} blocks open in ${blocks.runs || 0} runs; every block has its own `
      + "budget ");
    line.appendChild(amountNode("span", status.budget, false, "b-budget"));
    line.append(` (mode ${status.mode}).`);
    $("blocks-protects").textContent = blocks.protects
      ? `${blocks.protects.charAt(0).toUpperCase()}${blocks.protects.slice(1)}.` : "";
    // what a declaration must state for that to hold (a person unit: its contribution bounded)
    $("blocks-requires").hidden = !blocks.requires;
    $("blocks-requires").textContent = blocks.requires ? `Requires ${blocks.requires}.` : "";
    const legend = $("blocks-legend");
    legend.replaceChildren();
    const title = document.createElement("span");
    title.className = "legend-title";
    title.append("Fraction of each block's budget spent (certified reading ÷ block budget, ε): ");
    legend.appendChild(title);
    const scale = document.createElement("span");
    scale.className = "legend-scale";
    SHADES.forEach((label, k) => {
      const item = document.createElement("span");
      item.className = "legend-item";
      const s = document.createElement("span");
      s.className = `swatch f${k}`;
      item.append(s, label);
      scale.appendChild(item);
    });
    if (partition.kind === "day") {
      const item = document.createElement("span");
      item.className = "legend-item";
      const s = document.createElement("span");
      s.className = "swatch closed";
      item.append(s, "not open");
      scale.appendChild(item);
    }
    legend.appendChild(scale);
  }

  // The page's blocks as at most MAX_CELLS cells: consecutive open blocks, `group` to a cell,
  // each cell with the runs it covers and the highest fraction among them.
  function cellsOf(partition, runs) {
    const total = runs.reduce((n, r) => n + r.blocks, 0);
    const group = Math.max(1, Math.ceil(total / MAX_CELLS));
    const cells = [];
    let cur = null;
    runs.forEach((run, r) => {
      const lo = blockIndex(partition, run.from);
      let done = 0;
      while (done < run.blocks) {
        if (cur === null) {
          cur = { lo: lo + done, last: lo + done, count: 0, runs: [], top: r,
            fraction: run.fraction_spent };
        }
        const take = Math.min(run.blocks - done, group - cur.count);
        cur.count += take;
        cur.last = lo + done + take - 1;
        cur.runs.push(r);
        if (exceeds(run.fraction_spent, cur.fraction)) {
          cur.fraction = run.fraction_spent;
          cur.top = r;
        }
        done += take;
        if (cur.count === group) { cells.push(cur); cur = null; }
      }
    });
    if (cur !== null) cells.push(cur);
    return { cells, group, total };
  }

  function cellLabel(partition, index) {
    const kind = partition.kind;
    if (kind === "day") return String(dayOf(index).getUTCDate());
    if (kind === "week") return blockKey(partition, index).slice(6);
    if (kind === "month") return MONTHS[index % 12];
    if (kind === "bucket") return index < 1000 ? String(index) : "";
    return blockKey(partition, index);
  }

  // Calendar groups: a month (days, on a Monday-first grid), a year (weeks, months); one
  // group otherwise and whenever a cell holds several blocks.
  function groupOf(partition, index, group) {
    if (group > 1) return null;
    if (partition.kind === "day") {
      const d = dayOf(index);
      return `${MONTH_NAMES[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
    }
    if (partition.kind === "week") return blockKey(partition, index).slice(0, 4);
    if (partition.kind === "month") return String(1970 + Math.floor(index / 12));
    return null;
  }

  function newGroup(strip, label, calendar, firstDay) {
    const box = document.createElement("div");
    box.className = calendar ? "strip-group month" : "strip-group";
    if (label) {
      const title = document.createElement("div");
      title.className = "strip-label";
      title.textContent = label;
      box.appendChild(title);
    }
    const cells = document.createElement("div");
    cells.className = calendar ? "cells calendar" : "cells";
    if (calendar) {
      for (const w of ["M", "T", "W", "T", "F", "S", "S"]) {
        const h = document.createElement("span");
        h.className = "weekday";
        h.setAttribute("aria-hidden", "true");
        h.textContent = w;
        cells.appendChild(h);
      }
      // the weekdays before the month's first day: empty; its days before the first open
      // one: not open (places, not blocks)
      const first = dayOf(firstDay);
      const monthStart = Date.UTC(first.getUTCFullYear(), first.getUTCMonth(), 1) / DAY_MS;
      const offset = (new Date(monthStart * DAY_MS).getUTCDay() + 6) % 7;
      for (let i = 0; i < offset; i += 1) cells.appendChild(gap(null));
      for (let i = monthStart; i < firstDay; i += 1) cells.appendChild(gap(i));
      cells.dataset.next = String(firstDay);
      cells.dataset.end = String(Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 1)
        / DAY_MS);
    }
    box.appendChild(cells);
    strip.appendChild(box);
    return cells;
  }

  // An empty place of a calendar (no block): before the month's first day, or a day of the
  // month that is not open (``day``: its index).
  function gap(day) {
    const g = document.createElement("span");
    g.setAttribute("aria-hidden", "true");
    g.className = "gap";
    if (day != null) {
      g.classList.add("closed");
      g.textContent = String(dayOf(day).getUTCDate());
      g.title = `${blockKey({ kind: "day" }, day)}: not open`;
    }
    return g;
  }

  // A month's days after its last open one: not open.
  function closeMonth(cells) {
    if (!cells || !cells.dataset.end) return;
    for (let i = Number(cells.dataset.next); i < Number(cells.dataset.end); i += 1) {
      cells.appendChild(gap(i));
    }
  }

  function cellTitle(partition, c, runs) {
    const from = blockKey(partition, c.lo);
    const to = blockKey(partition, c.last);
    const run = runs[c.top];
    const fraction = `${fractionText(c.fraction)} of the block budget spent`;
    if (c.count === 1) {
      return `${from}: ${fraction} (run ${run.from} … ${run.to}, ${run.blocks} blocks)`;
    }
    return `${from} … ${to}: ${c.count} blocks, highest ${fraction}`;
  }

  function drawStrip(partition, runs) {
    const strip = $("blocks-strip");
    strip.replaceChildren();
    const { cells, group, total } = cellsOf(partition, runs);
    strip.classList.toggle("grouped", group > 1);
    strip.classList.toggle("named", partition.kind === "named" && group === 1);
    let label;
    let box = null;
    cells.forEach((c, k) => {
      const name = groupOf(partition, c.lo, group);
      const calendar = partition.kind === "day" && group === 1;
      if (box === null || name !== label) {
        closeMonth(box);
        label = name;
        box = newGroup(strip, name || (group > 1 ? `${group} blocks a cell` : ""), calendar,
          c.lo);
      } else if (calendar) {
        // days not open between two shown ones: empty places
        for (let i = Number(box.dataset.next); i < c.lo; i += 1) box.appendChild(gap(i));
      }
      if (calendar) box.dataset.next = String(c.lo + 1);
      const button = document.createElement("button");
      button.type = "button";
      button.className = `blk f${shadeOf(c.fraction)}`;
      button.dataset.cell = String(k);
      button.dataset.from = blockKey(partition, c.lo);
      button.dataset.to = blockKey(partition, c.last);
      button.dataset.blocks = String(c.count);
      button.dataset.fraction = c.fraction;
      button.dataset.runs = c.runs.join(" ");
      button.title = cellTitle(partition, c, runs);
      button.setAttribute("aria-label", button.title);
      button.textContent = group === 1 ? cellLabel(partition, c.lo) : "";
      button.addEventListener("click", () => showCell(c, runs, button));
      box.appendChild(button);
    });
    closeMonth(box);
    if (!cells.length) {
      const none = document.createElement("p");
      none.className = "strip-none";
      none.textContent = "No open block in this range.";
      strip.appendChild(none);
    }
    return { cells: cells.length, group, total };
  }

  function runRange(run) {
    return run.from === run.to ? run.from : `${run.from} … ${run.to}`;
  }

  // One run's drill-down: its blocks, the fraction spent and its status (the gauge: spent,
  // remaining in the mode's unit, the certified reading).
  function runDetail(run) {
    const box = document.createElement("div");
    box.className = "run-detail";
    const head = document.createElement("h4");
    head.className = "run-range";
    head.textContent = `${runRange(run)} · ${run.blocks} block${run.blocks === 1 ? "" : "s"}`
      + " with one history";
    box.appendChild(head);
    const f = document.createElement("p");
    f.className = "run-fraction";
    f.append(swatch(run.fraction_spent), "fraction spent ");
    const value = document.createElement("strong");
    value.className = "run-fraction-value";
    value.textContent = fractionText(run.fraction_spent);
    value.title = `${run.fraction_spent} (exact)`;
    f.append(value, " of each block's budget");
    box.appendChild(f);
    box.appendChild(gaugeFor(run.status, "each block of the run:"));
    return box;
  }

  function selectCells(runIndexes, button) {
    const wanted = new Set(runIndexes.map(String));
    for (const b of $("blocks-strip").querySelectorAll(".blk")) {
      b.classList.toggle("selected", b === button);
      b.classList.toggle("in-run", b.dataset.runs.split(" ").some((r) => wanted.has(r)));
    }
    for (const tr of $("blocks-runs").querySelectorAll("tbody tr")) {
      tr.classList.toggle("selected", wanted.has(tr.dataset.run));
    }
  }

  function showRun(runs, r, button) {
    selectCells([r], button || null);
    $("block-detail").replaceChildren(runDetail(runs[r]));
    $("block-detail").dataset.run = String(r);
  }

  function showCell(c, runs, button) {
    if (c.runs.length === 1) {
      showRun(runs, c.runs[0], button);
      return;
    }
    // a cell of several runs: which they are, the highest one's status first (its cells
    // marked as its run's)
    selectCells([c.top], button);
    const detail = $("block-detail");
    const intro = document.createElement("p");
    intro.className = "cell-summary";
    intro.textContent = `${button.dataset.from} … ${button.dataset.to}: ${c.count} blocks in `
      + `${new Set(c.runs).size} runs, highest fraction spent ${fractionText(c.fraction)}.`;
    const list = document.createElement("p");
    list.className = "cell-runs";
    list.append("Runs: ");
    [...new Set(c.runs)].forEach((r, i) => {
      if (i) list.append(" · ");
      const link = document.createElement("button");
      link.type = "button";
      link.className = "linkish";
      link.textContent = `${runRange(runs[r])} (${shown(runs[r].fraction_spent, true)})`;
      link.addEventListener("click", () => {
        selectCells([r], button);
        detail.replaceChildren(intro, list, runDetail(runs[r]));
        detail.dataset.run = String(r);
      });
      list.appendChild(link);
    });
    detail.replaceChildren(intro, list, runDetail(runs[c.top]));
    detail.dataset.run = String(c.top);
  }

  function runsTable(runs) {
    const tbody = $("blocks-runs").querySelector("tbody");
    tbody.replaceChildren();
    runs.forEach((run, r) => {
      const tr = document.createElement("tr");
      tr.dataset.run = String(r);
      tr.tabIndex = 0;
      cell(tr, run.from);
      cell(tr, run.to);
      cell(tr, run.blocks, "num");
      const f = cell(tr, "", "num");
      f.append(swatch(run.fraction_spent), shown(run.fraction_spent, true));
      f.title = `${run.fraction_spent} (exact)`;
      const [unit, , , remaining] = run.status && run.status.mode ? measure(run.status) : [];
      if (unit) tr.appendChild(amountNode("td", { [unit]: remaining }, false));
      else cell(tr, "");
      const open = () => showRun(runs, r, $("blocks-strip").querySelector(
        `.blk[data-runs~="${r}"]`));
      tr.addEventListener("click", open);
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
      tbody.appendChild(tr);
    });
  }

  async function showBlocks(from, to) {
    const ds = blockState.ds;
    const token = ++blockState.token;
    const params = new URLSearchParams({ limit: String(RUNS_PAGE) });
    if (from) params.set("from", from);
    if (to) params.set("to", to);
    const body = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/blocks?${params}`);
    if (token !== blockState.token) return; // a later request replaced this one
    const partition = body.partition || ds.partition;
    blockState.partition = partition;
    blockState.from = from || "";
    blockState.next = body.next;
    blockState.runs = body.runs;
    const drawn = drawStrip(partition, body.runs);
    runsTable(body.runs);
    $("blocks-runs").querySelector("summary").textContent =
      `Runs on this page: ${body.runs.length} (consecutive blocks with one history)`;
    const hint = document.createElement("p");
    hint.className = "hint";
    hint.textContent = "Select a block (or a run in the table below) to see its run: the"
      + " blocks that share its history, the fraction spent and its status.";
    $("block-detail").replaceChildren(...(body.runs.length ? [hint] : []));
    delete $("block-detail").dataset.run;
    const first = body.runs.length ? body.runs[0].from : null;
    const last = body.runs.length ? body.runs[body.runs.length - 1].to : null;
    let info = first === null ? `No open block here (${body.open} open in all).`
      : `Showing ${first} … ${last}: ${drawn.total} open block${drawn.total === 1 ? "" : "s"} in `
        + `${body.runs.length} run${body.runs.length === 1 ? "" : "s"} (${body.open} open in all)`;
    if (drawn.group > 1) {
      info += `; each cell draws up to ${drawn.group} neighbouring blocks, shaded by the `
        + "highest fraction among them";
    }
    $("b-info").textContent = info;
    $("b-prev").disabled = blockState.prev.length === 0;
    $("b-next").disabled = body.next == null;
    $("blocks").dataset.loaded = `${blockState.from}..${blockState.to}`;
  }

  async function firstBlocks() {
    blockState.prev = [];
    blockState.from = $("b-from").value.trim();
    blockState.to = $("b-to").value.trim();
    await showBlocks(blockState.from, blockState.to);
    await rangeTotals(blockState.from, blockState.to);
  }

  async function setupBlocks(ds) {
    blockState.ds = ds;
    blockState.partition = ds.partition;
    blockState.prev = [];
    blockState.to = "";
    setBlockInputs(ds.partition);
    showBlocksHeader(ds);
    delete $("blocks").dataset.loaded;
    $("blocks").hidden = false;
    await showBlocks("", "");
  }

  function startBlocks() {
    $("blocks-range").addEventListener("submit", (event) => {
      event.preventDefault();
      say("");
      firstBlocks().catch((e) => say(explain(e)));
    });
    $("b-all").addEventListener("click", () => {
      $("b-from").value = "";
      $("b-to").value = "";
      say("");
      firstBlocks().catch((e) => say(explain(e)));
    });
    $("b-next").addEventListener("click", () => {
      if (blockState.next == null) return;
      blockState.prev.push(blockState.from);
      showBlocks(blockState.next, blockState.to).catch((e) => say(explain(e)));
    });
    $("b-prev").addEventListener("click", () => {
      if (!blockState.prev.length) return;
      showBlocks(blockState.prev.pop(), blockState.to).catch((e) => say(explain(e)));
    });
  }

  // ------------------------------------------------------------------ organisation, datasets
  // The organisation view: cap, datasets, principals and the analysts' quotas, from the
  // organisations, principals, datasets and grants endpoints (grants: curators and auditors).
  // A cap is one filter in its mode's currency over every dataset of the organisation: the
  // card shows its certified (ε, δ) reading against the cap's ε, what the filter counts, the
  // datasets that used it and, for curators and auditors, the cap's replay from the ledgers.
  async function loadOrganisation(datasets) {
    const [orgs, people] = await Promise.all([
      api("/v1/organisations"), api("/v1/principals").catch(() => ({ principals: [] })),
    ]);
    state.names = {};
    for (const p of people.principals) state.names[p.id] = p.name;
    for (const org of orgs.organisations) state.orgNames[org.id] = org.name;
    // grants and the caps' replays are for curators and auditors: an analyst does not ask
    const overseer = state.role !== "analyst";
    const [grants, reports] = await Promise.all([
      Promise.all((overseer ? datasets.slice(0, MAX_GRANT_READS) : []).map((ds) =>
        api(`/v1/datasets/${encodeURIComponent(ds.id)}/grants`)
          .then((body) => body.grants.map((g) => ({ ...g, dataset: ds })))
          .catch(() => []))),
      // the cap's replay: curators and auditors only (an analyst's 403 just leaves it out)
      Promise.all(orgs.organisations.map((org) => (org.cap && overseer
        ? api(`/v1/organisations/${encodeURIComponent(org.id)}/report`).catch(() => null)
        : null))),
    ]);
    const box = $("organisations");
    box.replaceChildren();
    orgs.organisations.forEach((org, i) => {
      const card = document.createElement("div");
      card.className = "org";
      card.dataset.id = org.id;
      const title = document.createElement("h3");
      title.textContent = org.name;
      card.appendChild(title);
      const own = datasets.filter((ds) => ds.organisation === org.id);
      if (org.cap) {
        card.append(...capNodes(org, datasets, reports[i]));
        card.appendChild(capacityForm(org, own));
      } else {
        const cap = document.createElement("p");
        cap.className = "org-cap";
        cap.textContent = "No organisation-wide cap.";
        card.appendChild(cap);
        // what the replaced caps released stays stated without a cap in force
        if ((org.closed || []).length) card.appendChild(statementNode(org));
      }
      const list = document.createElement("p");
      list.textContent = `Datasets (${own.length}): ${own.map((ds) => ds.name).join(" · ") || "none"}`;
      card.appendChild(list);
      const members = people.principals.filter((p) => p.organisation_id === org.id);
      const who = document.createElement("p");
      who.className = "members";
      who.textContent = `People: ${members.map((p) => `${p.name} (${p.role})`).join(" · ") || "none visible"}`;
      card.appendChild(who);
      const quotas = grants.flat().filter((g) => g.dataset.organisation === org.id);
      if (quotas.length) card.appendChild(quotaTable(quotas));
      box.appendChild(card);
    });
  }

  // What a cap's filter counts, by mode (rdp counts a curve: no single number to show).
  const CURRENCY = { basic: "ε and δ", zcdp: "ρ (zCDP)", gdp: "μ² (GDP)" };

  function capNodes(org, datasets, report) {
    const status = org.status || {};
    const mode = org.cap.mode || status.mode || "basic";
    const cap = document.createElement("p");
    cap.className = "org-cap";
    cap.append("Cap ");
    cap.appendChild(amountNode("span", org.cap, false, "org-cap-amount"));
    const tag = document.createElement("span");
    tag.className = "org-mode";
    tag.textContent = `mode ${mode}`;
    cap.append(" (", tag, ")");
    const nodes = [cap, readingGauge(org)];
    if ((org.closed || []).length) nodes.push(statementNode(org));
    const counted = document.createElement("p");
    counted.className = "org-counted";
    if (mode === "rdp") {
      const orders = (status.orders || []).length;
      counted.textContent = `Counted: the Rényi (RDP) curve over ${orders} orders, no single`
        + " amount (the certified reading above is what it guarantees).";
    } else {
      counted.append(`Counted in ${CURRENCY[mode] || mode}: spent `);
      counted.appendChild(amountNode("span", org.spent, true, "org-spent"));
      if (org.reserved) {
        counted.append("; reserved ");
        counted.appendChild(amountNode("span", org.reserved, true, "org-reserved"));
        if (org.reserved.open) counted.append(` (${org.reserved.open} open)`);
      }
      if (org.remaining) {
        counted.append("; remaining ");
        counted.appendChild(amountNode("span", org.remaining, false, "org-remaining"));
      }
      if (mode !== "basic" && status.mode === mode) {
        // the cap's (ε, δ) as the filter's own budget in its currency
        const [unit, , , , budget] = measure(status);
        counted.append(" of the cap's ");
        counted.appendChild(amountNode("span", { [unit]: budget }, false, "org-budget"));
      }
    }
    nodes.push(counted);
    if (report) nodes.push(replayNode(report));
    const usage = Object.entries(org.usage || {});
    if (usage.length) {
      nodes.push(usageTable(usage, datasets, report));
    } else {
      const none = document.createElement("p");
      none.className = "org-usage-none";
      none.textContent = "No invocation has used the cap yet.";
      nodes.push(none);
    }
    return nodes;
  }

  // The organisation's statement once a cap was replaced after it counted: the closed phases'
  // readings plus the reading of the cap in force once it counted (basic composition of the
  // phases: ε₁ + ε₂, δ₁ + δ₂), with the server's note (its δ exceeds the first cap's), and the
  // closed phases one per row. It is what to quote for the organisation: the gauge above reads
  // the cap in force alone.
  function statementNode(org) {
    const box = document.createElement("div");
    box.className = "org-statement";
    const statement = org.statement;
    const line = document.createElement("p");
    line.className = "reading";
    const label = document.createElement("span");
    label.className = "reading-label";
    label.textContent = "Organisation statement to quote";
    line.append(label, " ", readingNode(statement, null, "g-odometer org-statement-value"));
    if (statement) line.append(` (${statement.phases} phase${statement.phases === 1 ? "" : "s"})`);
    box.appendChild(line);
    if (statement && statement.note) {
      const note = document.createElement("p");
      note.className = "note org-statement-note";
      note.textContent = `${statement.note.charAt(0).toUpperCase()}${statement.note.slice(1)}.`;
      box.appendChild(note);
    }
    const table = document.createElement("table");
    table.className = "closed-phases";
    table.createCaption().textContent = "Caps replaced after they counted (closed phases)";
    const head = table.createTHead().insertRow();
    for (const [text, cls] of [["Cap (mode, its last decision)", ""], ["ε", "num"],
      ["δ", "num"]]) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = text;
      if (cls) th.className = cls;
      head.appendChild(th);
    }
    const body = table.createTBody();
    for (const phase of org.closed) {
      const row = body.insertRow();
      cell(row, `${phase.mode}, until #${phase.after_seq}`, "phase-mode");
      // rounded up as every certified reading is, exact on hover
      for (const part of ["epsilon", "delta"]) {
        cell(row, shown(phase[part], true, READING_DIGITS), `num phase-${part}`).title = phase[part];
      }
    }
    const scroller = document.createElement("div");
    scroller.className = "table-box";
    scroller.appendChild(table);
    box.appendChild(scroller);
    return box;
  }

  // The certified reading (valid whenever the analysts stop, rounded up) as a bar against the
  // cap's ε. A basic cap's reading counts its open ODP reservations at their worst cell: that
  // part of the bar is drawn as reserved, as on the dataset gauges.
  function readingGauge(org) {
    const box = document.createElement("div");
    box.className = "gauge org-reading";
    const reading = org.status && org.status.odometer;
    if (!reading) {
      box.textContent = "no certified reading (see the cap's replay)";
      return box;
    }
    const reserved = org.reserved && org.reserved.epsilon != null ? org.reserved.epsilon : "0";
    const settled = minus(reading.epsilon, reserved) || reading.epsilon;
    const line = document.createElement("p");
    line.className = "reading";
    const label = document.createElement("span");
    label.className = "reading-label";
    // once a cap was replaced, the organisation's statement (below) is the one to quote
    label.textContent = (org.closed || []).length ? "Certified reading of the cap in force"
      : "Certified reading to quote";
    const summary = org.status.summary || null; // where the server sums a cap up too
    if (summary && summary.text) {
      const text = document.createElement("p");
      text.className = "summary-text";
      text.textContent = summary.text;
      box.appendChild(text);
    }
    const of = document.createElement("span");
    of.className = "reading-of";
    of.append("of the cap's ",
      amountNode("span", { epsilon: org.cap.epsilon }, false, "org-cap-epsilon"));
    line.append(label, " ", readingNode(reading, summary && summary.guarantee,
      "g-odometer org-odometer"), " ", of);
    box.appendChild(line);
    box.appendChild(barNode(org.cap.epsilon, [["spent", settled], ["reserved", reserved]]));
    return box;
  }

  function replayNode(report) {
    const p = document.createElement("p");
    p.className = "org-replay";
    p.append("Cap replay: ");
    const verdict = document.createElement("span");
    if (report.verified) {
      verdict.className = "ok";
      verdict.textContent = "verified";
      p.append(verdict, ` — ${report.decisions} decisions replayed from the datasets' ledgers`);
    } else {
      const problems = report.problems || [];
      verdict.className = "failed";
      verdict.textContent = `FAILED (${problems.length} problems)`;
      p.append(verdict, `: ${problems.join("; ")}`);
    }
    return p;
  }

  // What one dataset drew from the cap: an amount, or (rdp) a curve, exact on hover.
  function drawnCell(row, drawn) {
    if (!drawn || !Array.isArray(drawn.rdp)) {
      return row.appendChild(amountNode("td", drawn, true, "num drawn"));
    }
    const td = cell(row, `RDP curve (${drawn.rdp.length} orders)`, "num drawn");
    const orders = drawn.orders || [];
    td.title = drawn.rdp.map((v, k) => `α ${orders[k] != null ? orders[k] : k}: ${v}`).join(", ");
    return td;
  }

  // The datasets that used the cap (invocations registered under it), most first.
  function usageTable(usage, datasets, report) {
    const names = {};
    for (const ds of datasets) names[ds.id] = ds.name;
    const drawn = {};
    for (const d of report ? report.datasets : []) {
      drawn[d.id] = d.drawn;
      if (!names[d.id]) names[d.id] = d.name;
    }
    const label = (id) => names[id] || id;
    usage.sort((a, b) => b[1] - a[1] || label(a[0]).localeCompare(label(b[0])));
    const table = document.createElement("table");
    table.className = "usage compact";
    table.createCaption().textContent = "Datasets that used the cap";
    const head = table.createTHead().insertRow();
    const columns = [["Dataset", ""], ["Invocations", "num"]];
    if (report) columns.push(["Drawn from the cap", "num"]);
    for (const [text, cls] of columns) {
      const th = document.createElement("th");
      th.textContent = text;
      if (cls) th.className = cls;
      head.appendChild(th);
    }
    const body = table.createTBody();
    for (const [id, count] of usage) {
      const tr = body.insertRow();
      tr.dataset.id = id;
      cell(tr, label(id), "name").title = id;
      cell(tr, count, "num count");
      if (report) drawnCell(tr, drawn[id]);
    }
    return table;
  }

  // "How many more?": the cap's own count of one declaration, one after another.
  const DECLARATION = '{"type":"gaussian","sigma":"10","sensitivity":"1"}';

  function capacityForm(org, own) {
    const form = document.createElement("form");
    form.className = "capacity";
    form.autocomplete = "off";
    const label = document.createElement("label");
    label.append("How many more? A declaration (JSON)");
    const text = document.createElement("textarea");
    text.className = "cap-declaration";
    text.rows = 2;
    text.spellcheck = false;
    text.value = DECLARATION;
    label.appendChild(text);
    const on = document.createElement("label");
    on.append("on ");
    const select = document.createElement("select");
    select.className = "cap-dataset";
    select.appendChild(new Option("any dataset (add_remove)", ""));
    for (const ds of own) select.appendChild(new Option(ds.name, ds.id));
    on.appendChild(select);
    const button = document.createElement("button");
    button.type = "submit";
    button.className = "cap-count";
    button.textContent = "Count";
    const out = document.createElement("output");
    out.className = "cap-result";
    const row = document.createElement("div");
    row.className = "capacity-row";
    row.append(on, button, out);
    form.append(label, row);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      countMore(org, text.value, select.value, out, button);
    });
    return form;
  }

  async function countMore(org, text, datasetId, out, button) {
    out.className = "cap-result";
    out.title = "";
    let mechanism;
    try {
      mechanism = JSON.parse(text);
    } catch (e) {
      out.textContent = `The declaration is not JSON: ${e.message}`;
      out.classList.add("failed");
      return;
    }
    const body = { mechanism };
    if (datasetId) body.dataset_id = datasetId;
    out.textContent = "counting…";
    button.disabled = true;
    try {
      const r = await api(`/v1/organisations/${encodeURIComponent(org.id)}/cap/capacity`,
        undefined, body);
      out.textContent = `admits ${r.at_least ? "at least " : ""}${r.count} more`
        + (r.reason ? ` (next refused: ${r.reason})` : "");
      out.title = `counted by the cap's ${r.mode} filter under ${r.relation}`;
    } catch (err) {
      out.textContent = err instanceof HttpError && ![401, 404].includes(err.status)
        ? `Not counted: ${err.message}` : explain(err);
      out.classList.add("failed");
    } finally {
      button.disabled = false;
    }
  }

  function quotaTable(grants) {
    const table = document.createElement("table");
    table.className = "quotas compact";
    const head = table.createTHead().insertRow();
    for (const text of ["Analyst", "Dataset", "Quota"]) {
      const th = document.createElement("th");
      th.textContent = text;
      head.appendChild(th);
    }
    const body = table.createTBody();
    for (const g of grants) {
      const tr = body.insertRow();
      cell(tr, nameOf(g.principal_id), "name").title = g.principal_id;
      cell(tr, g.dataset.name).title = g.dataset.id;
      if (g.quota) tr.appendChild(amountNode("td", g.quota, false, "quota"));
      else cell(tr, "no quota", "quota");
    }
    return table;
  }

  // ------------------------------------------------------------------ the list and the homes
  // One row per dataset: its name, mode and reading (the list is the master of a master-detail
  // layout: on a wide window it stays on the left, the selected dataset's detail or the
  // role's home on the right; on a phone they stack).
  function listGauge(ds) {
    return ds.partition ? blocksSummary(ds) : gaugeFor(ds.status);
  }

  function renderList(datasets) {
    const tbody = $("datasets").querySelector("tbody");
    tbody.replaceChildren();
    for (const ds of datasets) {
      const tr = document.createElement("tr");
      tr.dataset.id = ds.id;
      tr.className = "ds-row";
      cell(tr, ds.name, "name").title = ds.id;
      const mode = cell(tr, "", "mode");
      const tag = document.createElement("span");
      tag.className = "mode-tag";
      tag.textContent = ds.mode;
      mode.appendChild(tag);
      cell(tr, "", "gauge-cell").appendChild(listGauge(ds));
      if (ds.partition) tr.classList.add("partitioned");
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Show";
      button.className = "show";
      button.setAttribute("aria-label", `Show ${ds.name}`);
      button.addEventListener("click", () => selectDataset(ds).catch((e) => say(explain(e))));
      cell(tr, "", "action").appendChild(button);
      tr.classList.toggle("selected", Boolean(state.dataset && state.dataset.id === ds.id));
      tbody.appendChild(tr);
    }
    $("list-count").textContent = `(${datasets.length})`;
  }

  // A dataset's row again, from a status read since (the live refresh of the open dataset).
  function updateRow(fresh) {
    const i = state.datasets.findIndex((d) => d.id === fresh.id);
    if (i >= 0) state.datasets[i] = { ...state.datasets[i], status: fresh.status };
    const td = $("datasets").querySelector(`tr[data-id="${CSS.escape(fresh.id)}"] td.gauge-cell`);
    if (td) td.replaceChildren(listGauge({ ...fresh, partition: fresh.partition }));
  }

  // GET /v1/me: who the key is (null from a server without it: the role is then inferred
  // from what the key may read).
  async function whoami() {
    try {
      return await api("/v1/me");
    } catch (err) {
      if (err.status === 404 || err.status === 405) return null;
      throw err;
    }
  }

  const HOME_TITLES = {
    admin: "Every organisation and dataset",
    curator: "Your organisation: datasets, caps and grants",
    analyst: "Your grants, quotas and spend",
    auditor: "Your reports",
  };

  const HOME_INTROS = {
    admin: "As the administrator you see every organisation with its cap, and every dataset."
      + " Select a dataset for its live reading and its report.",
    curator: "Your organisation's cap, datasets and the analysts' grants with their quotas."
      + " Select a dataset for its live reading, its report and its ledger.",
    analyst: "Each dataset you may spend on, with your quota's certified reading (what you"
      + " have spent under it) and what is left of it. Select a dataset for its live reading.",
    auditor: "Every report of your organisation: each dataset's certified reading and the"
      + " replay of its ledger. Open one for its charts, totals and ledger.",
  };

  function whoText() {
    const me = state.me;
    if (!me) return "role unknown (this server has no GET /v1/me)";
    if (me.role === "admin") {
      return `${me.name === "admin" ? "" : `${me.name} · `}admin · every organisation`;
    }
    const org = me.organisation ? state.orgNames[me.organisation] || me.organisation : "";
    return `${me.name} · ${me.role}${org ? ` · ${org}` : ""}`;
  }

  function showWho() {
    const who = $("whoami");
    who.textContent = whoText();
    who.hidden = false;
    document.body.dataset.role = state.role || "unknown";
  }

  // The role's home: what it is for, then its own panel (an analyst's grants, an auditor's
  // reports) and the organisation cards.
  async function renderHome(datasets) {
    const role = state.role;
    const token = ++state.homeToken;
    $("home-title").textContent = HOME_TITLES[role] || "Organisations and datasets";
    $("home-intro").textContent = HOME_INTROS[role]
      || "Select a dataset for its live reading and, where this key may read it, its report.";
    $("org-heading").textContent = role === "admin" ? "Organisations" : "Your organisation";
    $("grants").hidden = role !== "analyst";
    $("reports").hidden = role !== "auditor";
    if (role === "analyst") renderGrants(datasets);
    const pending = [loadOrganisation(datasets)];
    if (role === "auditor") pending.push(renderReports(datasets, token));
    await Promise.all(pending);
    showWho();
  }

  // A grant's quota: its certified reading (the analyst's own spend under it), what is left;
  // or no quota (the dataset's budget alone bounds the analyst).
  function quotaNodes(grant) {
    const nodes = [];
    const quota = document.createElement("p");
    quota.className = "grant-quota";
    if (!grant.quota) {
      quota.textContent = "No quota: your charges count against the dataset's budget only (the"
        + " API keeps no separate reading of them).";
      nodes.push(quota);
      return nodes;
    }
    quota.append("Your quota ");
    quota.appendChild(amountNode("span", grant.quota.budget, false, "quota-budget"));
    nodes.push(quota);
    const summary = grant.quota.summary;
    const block = readingBlock(summary, null,
      { label: "Your spend: certified reading of your quota", cls: "q-odometer" });
    // the bar: the share used of the quota's most used budget (floats size bars only)
    const fractions = (summary.left || []).map((i) => Number(i.fraction));
    if (fractions.length) {
      const used = Math.max(0, 1 - Math.min(...fractions));
      const bar = barNode(1, [["spent", used]]);
      bar.title = `${percentText(used.toFixed(4))} of the quota's most used budget`;
      block.appendChild(bar);
    }
    block.classList.add("gauge", "quota-gauge");
    nodes.push(block);
    return nodes;
  }

  function grantOf(datasetId) {
    const grants = state.me && Array.isArray(state.me.grants) ? state.me.grants : [];
    return grants.find((g) => g.dataset_id === datasetId) || null;
  }

  function renderGrants(datasets) {
    const box = $("grants");
    box.replaceChildren();
    const grants = state.me && Array.isArray(state.me.grants) ? state.me.grants : [];
    const head = document.createElement("h3");
    head.textContent = `Your grants (${grants.length})`;
    box.appendChild(head);
    if (!grants.length) {
      const none = document.createElement("p");
      none.className = "note";
      none.textContent = "No grant yet: a curator of your organisation grants datasets.";
      box.appendChild(none);
    }
    for (const grant of grants) {
      const ds = datasets.find((d) => d.id === grant.dataset_id);
      const card = document.createElement("div");
      card.className = "grant";
      card.dataset.id = grant.dataset_id;
      const top = document.createElement("div");
      top.className = "grant-head";
      const name = document.createElement("h4");
      name.textContent = grant.dataset_name || (ds && ds.name) || grant.dataset_id;
      top.appendChild(name);
      if (ds) {
        const tag = document.createElement("span");
        tag.className = "mode-tag";
        tag.textContent = ds.mode;
        const open = document.createElement("button");
        open.type = "button";
        open.className = "open";
        open.textContent = "Open";
        open.addEventListener("click", () => selectDataset(ds).catch((e) => say(explain(e))));
        top.append(tag, open);
      }
      card.appendChild(top);
      card.append(...quotaNodes(grant));
      if (ds && ds.status && ds.status.odometer) {
        const whole = document.createElement("p");
        whole.className = "grant-dataset";
        whole.append("The dataset's reading (everyone's charges): ");
        whole.appendChild(readingNode(ds.status.odometer,
          ds.status.summary && ds.status.summary.guarantee, "ds-odometer"));
        card.appendChild(whole);
      }
      box.appendChild(card);
    }
  }

  // An auditor's reports: each dataset's reading and its report's replay verdict, rejections
  // and entries (the first MAX_REPORTS datasets, three reports read at a time).
  async function renderReports(datasets, token) {
    const tbody = $("reports-table").querySelector("tbody");
    tbody.replaceChildren();
    const rows = datasets.slice(0, MAX_REPORTS).map((ds) => {
      const tr = document.createElement("tr");
      tr.dataset.id = ds.id;
      cell(tr, ds.name, "name").title = ds.id;
      cell(tr, ds.partition ? `${ds.mode}, partitioned` : ds.mode, "mode n");
      const reading = cell(tr, "", "reading-cell");
      if (ds.status && (ds.status.odometer || ds.status.summary)) {
        const summary = ds.status.summary;
        const value = readingNode(ds.status.odometer, summary && summary.guarantee,
          "r-odometer");
        if (summary && summary.text) {
          const text = document.createElement("span");
          text.className = "summary-text";
          text.textContent = summary.text;
          reading.append(text, value);
        } else {
          reading.appendChild(value);
        }
      }
      cell(tr, "reading…", "replay n");
      cell(tr, "", "num n rejections");
      cell(tr, "", "num n entries");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "open";
      button.textContent = "Open";
      button.addEventListener("click", () => selectDataset(ds).catch((e) => say(explain(e))));
      cell(tr, "", "action").appendChild(button);
      labelCells($("reports-table"), tr);
      tbody.appendChild(tr);
      return [ds, tr];
    });
    if (datasets.length > MAX_REPORTS) {
      const tr = document.createElement("tr");
      cell(tr, `… and ${datasets.length - MAX_REPORTS} more in the list`, "more-rows").colSpan = 7;
      tbody.appendChild(tr);
    }
    let next = 0;
    const worker = async () => {
      while (next < rows.length && token === state.homeToken) {
        const [ds, tr] = rows[next++];
        const replay = tr.querySelector("td.replay");
        try {
          const report = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/report`);
          const v = report.verification;
          replay.textContent = v && v.ok ? "verified" : `FAILED (${v ? v.problem_count : "?"})`;
          replay.className = `replay n ${v && v.ok ? "ok" : "failed"}`;
          replay.title = verdictText(v);
          tr.querySelector("td.rejections").textContent = String(report.rejections.total);
          tr.querySelector("td.entries").textContent = String(report.ledger.entries);
        } catch (err) {
          replay.textContent = err.status === 403 ? "not readable by this key" : explain(err);
        }
      }
    };
    await Promise.all([worker(), worker(), worker()]);
    document.body.dataset.reports = "loaded";
  }

  async function loadAll() {
    say("");
    const me = await whoami(); // a refused key stops here (401)
    state.me = me;
    state.role = me ? me.role : null;
    const body = await api("/v1/datasets?limit=1000");
    state.datasets = body.datasets;
    renderList(body.datasets);
    $("main").hidden = false;
    $("login").hidden = true;
    $("toolbar").hidden = false;
    showWho();
    if (!body.datasets.length) say("No datasets are visible to this key.");
    const home = renderHome(body.datasets).catch((e) => say(explain(e)));
    await route();
    await home;
    document.body.dataset.home = state.role || "unknown";
  }

  // ------------------------------------------------------------------ navigation
  // The selected dataset is in the address (#ds=ID): the back button goes home again, and a
  // reload opens the same dataset.
  function routeId() {
    const m = /^#ds=(.+)$/.exec(window.location.hash);
    return m ? decodeURIComponent(m[1]) : null;
  }

  function setRoute(id) {
    if (routeId() === id) return;
    const url = id ? `#ds=${encodeURIComponent(id)}`
      : window.location.pathname + window.location.search;
    window.history.pushState({ ds: id }, "", url);
  }

  async function route() {
    const id = routeId();
    const ds = id ? state.datasets.find((d) => d.id === id) : null;
    if (ds) await selectDataset(ds, true).catch((e) => say(explain(e)));
    else showHome(true);
  }

  function narrow() { return window.matchMedia("(max-width: 999px)").matches; }

  function showHome(fromRoute) {
    stopLive();
    state.dataset = null;
    $("detail").hidden = true;
    $("home").hidden = false;
    for (const tr of $("datasets").querySelectorAll("tbody tr")) tr.classList.remove("selected");
    document.body.classList.remove("has-detail");
    if (!fromRoute) {
      setRoute(null);
      if (narrow()) $("view-pane").scrollIntoView({ block: "start" });
    }
  }

  // ------------------------------------------------------------------ report
  function safeSvg(text) {
    const doc = new DOMParser().parseFromString(text, "image/svg+xml");
    const root = doc.documentElement;
    if (root.namespaceURI !== SVG_NS || root.localName !== "svg"
        || doc.getElementsByTagName("parsererror").length) {
      throw new Error("the server did not send an SVG document");
    }
    for (const el of Array.from(root.querySelectorAll("script, foreignObject, a, use"))) {
      el.remove();
    }
    for (const el of [root, ...root.querySelectorAll("*")]) {
      for (const attr of Array.from(el.attributes)) {
        if (/^on/i.test(attr.name) || /href$/i.test(attr.name)) el.removeAttribute(attr.name);
      }
    }
    return document.importNode(root, true);
  }

  async function showChart(figureId, path) {
    const figure = $(figureId);
    figure.replaceChildren();
    figure.appendChild(safeSvg(await api(path, "image/svg+xml")));
  }

  function svgNode(tag, attrs, text) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    if (text != null) el.textContent = text;
    return el;
  }

  // The page's own per-analyst chart outside basic mode: each analyst's attribution (the
  // (ε, δ) of its own charges alone), a bar of its ε against the budget's ε. Not a certified
  // statement: the shares do not add up to the dataset's reading (the server's chart counts
  // the charges in the mode's unit, which a curve has none of).
  function attributionChart(rows, budget, datasetName) {
    const labelW = 200;
    const barW = 300;
    const rowH = 30;
    const top = 58;
    const width = labelW + barW + 230;
    const height = top + rowH * Math.max(1, rows.length) + 34;
    const svg = svgNode("svg", { viewBox: `0 0 ${width} ${height}`, width, height,
      role: "img", class: "attribution-chart",
      "aria-label": `Attribution per analyst of dataset ${datasetName} (not certified)` });
    svg.appendChild(svgNode("text", { x: 12, y: 22, class: "chart-title" },
      `Attribution per analyst (ε) of dataset ${datasetName}`));
    svg.appendChild(svgNode("text", { x: 12, y: 42, class: "chart-sub" },
      "not certified: each analyst's own charges alone; shares do not add up to the reading"));
    const whole = Math.max(Number(budget) || 0,
      ...rows.map((r) => Number(r.attribution.epsilon) || 0)) || 1;
    rows.forEach((r, i) => {
      const y = top + i * rowH;
      const g = svgNode("g", { class: "analyst" });
      const name = r.name || nameOf(r.actor);
      const short = name.length > 28 ? `${name.slice(0, 27)}…` : name;
      g.appendChild(svgNode("text", { x: labelW - 8, y: y + 17, "text-anchor": "end",
        class: "label" }, short));
      const w = Math.max(1, (barW * (Number(r.attribution.epsilon) || 0)) / whole);
      const bar = svgNode("rect", { x: labelW, y: y + 5, width: w, height: 16,
        class: "attribution-bar" });
      bar.appendChild(svgNode("title", {},
        `${name}: attribution ε ${r.attribution.epsilon}, δ ${r.attribution.delta} (not certified)`));
      g.appendChild(bar);
      g.appendChild(svgNode("text", { x: labelW + w + 6, y: y + 17, class: "value" },
        `ε ${shown(r.attribution.epsilon, true, READING_DIGITS)}, `
        + `δ ${shown(r.attribution.delta, true, READING_DIGITS)}`));
      svg.appendChild(g);
    });
    const axisY = top + rowH * Math.max(1, rows.length) + 4;
    svg.appendChild(svgNode("line", { x1: labelW, y1: axisY, x2: labelW + barW, y2: axisY,
      class: "axis" }));
    svg.appendChild(svgNode("text", { x: labelW, y: axisY + 16, class: "tick" }, "0"));
    svg.appendChild(svgNode("text", { x: labelW + barW, y: axisY + 16, "text-anchor": "end",
      class: "tick" }, `ε ${shown(String(whole), false)}`));
    return svg;
  }

  function verdictText(v) {
    if (!v) return "not run";
    if (v.ok) return `OK — ${v.entries} entries replayed, head hash matches`;
    return `FAILED (${v.problem_count} problems): ${v.first_problem}`;
  }

  function countsTable(id, counts) {
    const tbody = $(id).querySelector("tbody");
    tbody.replaceChildren();
    const entries = Object.entries(counts);
    if (!entries.length) {
      const tr = document.createElement("tr");
      cell(tr, "none");
      cell(tr, "0", "num");
      tbody.appendChild(tr);
    }
    for (const [key, n] of entries) {
      const tr = document.createElement("tr");
      tr.dataset.key = key;
      cell(tr, key);
      cell(tr, n, "num count");
      tbody.appendChild(tr);
    }
  }

  // A table's header row from [text, class] pairs.
  function setHead(table, columns) {
    const tr = table.tHead.rows[0];
    tr.replaceChildren(...columns.map(([text, cls]) => {
      const th = document.createElement("th");
      th.textContent = text;
      if (cls) th.className = cls;
      return th;
    }));
  }

  // Each cell of a row named by its column's header (data-label): a narrow window draws the
  // table's rows as cards, each value under its column's name.
  function labelCells(table, tr) {
    const heads = Array.from(table.tHead.rows[0].cells).map((th) => th.textContent);
    Array.from(tr.cells).forEach((td, i) => {
      if (heads[i]) td.dataset.label = heads[i];
    });
  }

  // A charge as text: scalar amounts, or (rdp) a curve, which has no single amount (its
  // values by order on hover).
  function chargeNode(tag, obj, up, cls, curve) {
    const rdp = curve || (obj && Array.isArray(obj.rdp) ? obj : null);
    if (!rdp) return amountNode(tag, obj, up, cls);
    const el = document.createElement(tag);
    if (cls) el.className = cls;
    const delta = obj && typeof obj.delta === "string" && obj.delta !== "0"
      ? `, δ ${shown(obj.delta, up)}` : "";
    el.textContent = `RDP curve${delta}`;
    const orders = rdp.orders || [];
    el.title = `an RDP curve over ${rdp.rdp.length} orders (no single amount): ` + rdp.rdp.map((v, k) => `α ${orders[k] != null ? orders[k] : k}: ${v}`).join(", ");
    return el;
  }

  // The attribution cell: (ε, δ) of these charges alone, labelled not certified.
  function attributionCell(tr, row) {
    const a = row.attribution;
    if (!a) return cell(tr, "—", "num attribution");
    const td = cell(tr, `ε ${shown(a.epsilon, true, READING_DIGITS)}, `
      + `δ ${shown(a.delta, true, READING_DIGITS)}`, "num attribution");
    td.title = `ε ${a.epsilon}, δ ${a.delta}: attribution, not certified (shares do not add`
      + " up to the dataset's reading)";
    return td;
  }

  const COUNTS = [["Accepted", "accepted"], ["Reserved", "reserved"], ["Settled", "settled"],
    ["Cancelled", "cancelled"], ["Rejected", "rejected"]];

  // Attribution is shown outside basic mode (in basic it is the net charge itself), where the
  // report has it (an older server's has not: the net charge is all there is).
  function attributed(report, rows) {
    return report.dataset.mode !== "basic" && rows.some((r) => r.attribution);
  }

  async function showAnalysts(ds, report) {
    const grants = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/grants`)
      .catch(() => ({ grants: [] }));
    const quotas = {};
    for (const g of grants.grants) quotas[g.principal_id] = g.quota;
    const table = $("analysts");
    const withAttribution = attributed(report, report.analysts);
    setHead(table, [["Analyst"], ["Quota"], ...COUNTS.map(([t]) => [t, "num"]),
      ["Net charge", "num"], ["Refunded", "num"],
      ...(withAttribution ? [["Attribution (not certified)", "num"]] : [])]);
    const tbody = table.querySelector("tbody");
    tbody.replaceChildren();
    const select = $("f-actor");
    select.replaceChildren(new Option("anyone", ""));
    const actors = new Set(report.analysts.map((a) => a.actor));
    for (const g of grants.grants) actors.add(g.principal_id);
    for (const a of report.analysts) if (a.name) state.names[a.actor] = a.name;
    for (const actor of actors) select.appendChild(new Option(nameOf(actor), actor));
    for (const a of report.analysts) {
      const tr = document.createElement("tr");
      cell(tr, nameOf(a.actor), "name").title = a.actor;
      const quota = quotas[a.actor];
      const q = cell(tr, "");
      if (quota) q.appendChild(amountNode("span", quota, false)); else q.textContent = "—";
      for (const [, k] of COUNTS) cell(tr, a[k], "num n");
      tr.appendChild(chargeNode("td", a.charged, true, "num", a.curve));
      tr.appendChild(amountNode("td", a.refunded, false, "num"));
      if (withAttribution) attributionCell(tr, a);
      labelCells(table, tr);
      tbody.appendChild(tr);
    }
  }

  function showMechanisms(report) {
    const table = $("mechanisms");
    const rows = report.mechanisms || [];
    const withAttribution = attributed(report, rows);
    setHead(table, [["Kind"], ...COUNTS.map(([t]) => [t, "num"]), ["Net charge", "num"],
      ["Refunded", "num"], ...(withAttribution ? [["Attribution (not certified)", "num"]] : [])]);
    const tbody = table.querySelector("tbody");
    tbody.replaceChildren();
    for (const m of rows) {
      const tr = document.createElement("tr");
      tr.dataset.kind = m.kind;
      cell(tr, m.kind, "name");
      for (const [, k] of COUNTS) cell(tr, m[k], "num n");
      tr.appendChild(chargeNode("td", m.charged, true, "num", m.curve));
      tr.appendChild(amountNode("td", m.refunded, false, "num"));
      if (withAttribution) attributionCell(tr, m);
      labelCells(table, tr);
      tbody.appendChild(tr);
    }
  }

  // The per-analyst chart: the server's (net charge and refunds in the mode's unit) in basic
  // mode; outside it the page's own chart of each analyst's attribution, where the report has
  // one (the server's chart would show curve charges as 0).
  async function showAnalystsChart(base, report) {
    const note = $("analysts-note");
    note.hidden = true;
    if (attributed(report, report.analysts)) {
      const rows = report.analysts.filter((a) => a.attribution);
      $("analysts-chart").replaceChildren(attributionChart(rows,
        report.guarantee && report.guarantee.budget ? report.guarantee.budget.epsilon : "1",
        report.dataset.name));
      note.textContent = "Attribution (not certified): the (ε, δ) of each analyst's own charges"
        + " alone. The shares do not add up to the dataset's certified reading, the one to quote.";
      note.hidden = false;
      return;
    }
    await showChart("analysts-chart", `${base}/analysts.svg`);
    if (report.dataset.mode !== "basic") {
      note.textContent = "This server's report has no attribution: charges without a scalar"
        + " amount (curves) count as 0 in this chart.";
      note.hidden = false;
    }
  }

  function spendNote(report) {
    const note = $("spend-note");
    const unit = report.series && report.series.unit;
    const certified = report.guarantee ? report.guarantee.certified : true;
    note.hidden = report.dataset.mode === "basic" || Boolean(report.blocks);
    if (unit && unit !== "epsilon") {
      note.textContent = `Drawn in ${UNIT[unit] || unit}, what the ${report.dataset.mode} filter`
        + " counts; the certified reading to quote is at the top.";
    } else if (!certified) {
      note.textContent = "Drawn as the (ε, δ) estimate, not certified; the certified reading"
        + " to quote is at the top.";
    } else {
      note.hidden = true;
    }
  }

  // The report's totals: rejections, ledger kinds, per declaration kind and per analyst (on a
  // partitioned dataset, of the invocations whose blocks meet the range the report was read for).
  async function showTotals(ds, report) {
    countsTable("rejections", report.rejections.by_level);
    countsTable("reasons", report.rejections.by_reason);
    countsTable("kinds", report.ledger.kinds);
    showMechanisms(report);
    await showAnalysts(ds, report);
  }

  function rangeNote(first, last) {
    const range = first || last ? `blocks ${first || "…"} … ${last || "…"}` : "any block";
    $("partition-note").textContent = "On a partitioned dataset a charge is spent by each block"
      + " it selects. The report's totals (rejections, entries by kind, per analyst and per"
      + ` declaration kind) count the invocations whose blocks meet ${range}, adding charges`
      + " made on different blocks: they are no block's spend (the strip above shows each"
      + " block's). The chart counts every block.";
    $("report-parts").dataset.range = `${first}..${last}`;
  }

  // A block range chosen in the strip's form: the report's totals for that range too.
  async function rangeTotals(first, last) {
    const ds = state.dataset;
    if (!ds || !ds.partition || !state.reportReadable) return;
    const query = new URLSearchParams();
    if (first) query.set("from", first);
    if (last) query.set("to", last);
    const report = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/report?${query}`);
    if (state.dataset !== ds) return;
    await showTotals(ds, report);
    rangeNote(first, last);
  }

  // ------------------------------------------------------------------ live refresh
  // The open dataset's status is read again every POLL_MS while the tab is visible (paused
  // while it is hidden, read at once when it shows again); its gauge and its list row follow,
  // "updated hh:mm:ss" says when it was last read, and new activity since the report below
  // was read offers to reload it. An analyst's quota is read again with it (GET /v1/me).
  const live = { ds: null, timer: null, seen: null, busy: false };

  function clock(date) {
    return `${pad2(date.getHours())}:${pad2(date.getMinutes())}:${pad2(date.getSeconds())}`;
  }

  function liveNote() {
    $("live-note").textContent = document.hidden ? "· paused while this tab is hidden"
      : `· live, every ${POLL_MS < 1000 ? `${POLL_MS} ms` : `${POLL_MS / 1000} s`}`;
  }

  function stopLive() {
    clearTimeout(live.timer);
    live.timer = null;
    live.ds = null;
    live.seen = null;
  }

  function schedule() {
    clearTimeout(live.timer);
    live.timer = null;
    if (!live.ds) return;
    liveNote();
    if (!document.hidden) live.timer = setTimeout(() => { pollOnce(); }, POLL_MS);
  }

  async function pollOnce() {
    const ds = live.ds;
    if (!ds || document.hidden || live.busy) return;
    live.busy = true;
    try {
      const [fresh, me] = await Promise.all([
        api(`/v1/datasets/${encodeURIComponent(ds.id)}`),
        state.role === "analyst" ? whoami().catch(() => null) : null,
      ]);
      if (live.ds !== ds) return;
      if (me) {
        state.me = me;
        showMyQuota(ds.id);
      }
      applyStatus(fresh);
    } catch (err) {
      if (live.ds === ds) $("live-note").textContent = `· not refreshed (${explain(err)}); retrying`;
    } finally {
      live.busy = false;
      if (live.ds === ds) schedule();
    }
  }

  // A dataset frozen behind its witness (status.frozen): a banner above its reading, which
  // may be rolled back (the database lost entries the witness holds); hidden otherwise.
  function frozenBanner(frozen) {
    const banner = $("frozen-banner");
    if (!frozen) {
      banner.hidden = true;
      banner.replaceChildren();
      return;
    }
    const head = document.createElement("strong");
    head.textContent = "Frozen behind its witness: writes are refused.";
    const heads = document.createElement("span");
    heads.textContent = ` ${frozen.reason} (witness seq ${frozen.witnessed_seq}, database seq `
      + `${frozen.database_seq}${frozen.sibling ? `, behind: ${frozen.sibling}` : ""}): `
      + `${frozen.reading}.`;
    const detail = document.createElement("span");
    detail.className = "frozen-detail";
    detail.textContent = ` ${frozen.detail}`;
    banner.replaceChildren(head, heads, detail);
    banner.hidden = false;
  }

  // A status just read: the detail's gauge and the list's row when it changed; the time.
  function applyStatus(fresh) {
    const key = JSON.stringify(fresh.status);
    if (key !== live.seen) {
      live.seen = key;
      frozenBanner(fresh.status && fresh.status.frozen);
      $("detail-gauge").replaceChildren(listGauge({ ...fresh, partition: fresh.partition }));
      updateRow(fresh);
      if (state.reportKey !== null && key !== state.reportKey) $("stale").hidden = false;
    }
    const now = new Date();
    const updated = $("updated");
    updated.textContent = `updated ${clock(now)}`;
    updated.title = `status read at ${now.toISOString()}`;
    updated.dataset.at = String(now.getTime());
  }

  function startLive(ds, fresh) {
    stopLive();
    live.ds = ds;
    applyStatus(fresh);
    schedule();
  }

  document.addEventListener("visibilitychange", () => {
    if (!live.ds) return;
    if (document.hidden) schedule(); else pollOnce();
  });

  // ------------------------------------------------------------------ how many more fit
  // "How many more fit?": a declaration previewed on the open dataset (nothing written): how
  // many of it the caller could register in a row now, nothing else admitted meanwhile, the
  // level that admits the fewest and why the next would be refused (preview's fit: each
  // level's filter counts exactly what its own admission would admit, up to 1000000).
  // Prefilled with the last admitted declaration (the one the summary's "more" counts), else
  // a Gaussian. Previews are an analyst's; a key whose role is unknown may try.
  const FIT_EXAMPLE = '{"type":"gaussian","sigma":"10","sensitivity":"1"}';

  function setupFit(fresh) {
    const form = $("fit-form");
    form.hidden = !(state.role === "analyst" || state.role === null);
    const summary = fresh.status && fresh.status.summary;
    const more = summary && summary.more;
    $("fit-declaration").value = more && more.of ? JSON.stringify(more.of) : FIT_EXAMPLE;
    const subs = fresh.status && fresh.status.sub_budgets ? Object.keys(fresh.status.sub_budgets)
      : [];
    $("fit-sub-budget").replaceChildren(...subs.map((name) => new Option(name, name)));
    if (more && more.sub_budget) $("fit-sub-budget").value = more.sub_budget;
    $("fit-on").hidden = subs.length === 0;
    const out = $("fit-result");
    out.textContent = "";
    out.className = "fit-result";
    delete out.dataset.count;
    $("fit-reason").textContent = "";
  }

  async function countFit() {
    const ds = state.dataset;
    const out = $("fit-result");
    const reason = $("fit-reason");
    const button = $("fit-count");
    if (!ds) return;
    out.className = "fit-result";
    delete out.dataset.count;
    reason.textContent = "";
    let mechanism;
    try {
      mechanism = JSON.parse($("fit-declaration").value);
    } catch (e) {
      out.textContent = `The declaration is not JSON: ${e.message}`;
      out.classList.add("failed");
      return;
    }
    const body = { mechanism };
    const sub = $("fit-sub-budget").value;
    if (!$("fit-on").hidden && sub) body.sub_budget = sub;
    if (ds.partition) body.blocks = "all"; // every open block: the fewest any of them admits
    out.textContent = "counting…";
    button.disabled = true;
    try {
      const r = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/invocations/preview`,
        undefined, body);
      if (state.dataset !== ds) return;
      const fit = r.fit;
      if (!fit) {
        out.textContent = "This server does not count how many more fit.";
        return;
      }
      out.dataset.count = String(fit.count);
      out.dataset.level = fit.level;
      out.textContent = fit.at_least ? `at least ${fit.count} more fit in a row`
        : `${fit.count} more ${fit.count === 1 ? "fits" : "fit"} in a row`
          + ` (the ${fit.level} admits the fewest)`;
      out.title = `preview of ${JSON.stringify(mechanism)}: ${r.status} now`
        + (r.level ? ` (refused by the ${r.level})` : "");
      reason.textContent = fit.reason ? `The next one would be refused: ${fit.reason}` : "";
    } catch (err) {
      if (state.dataset !== ds) return;
      out.textContent = err instanceof HttpError && err.status === 403
        ? "Not counted: previews are an analyst's (this key may not preview)"
        : err instanceof HttpError && ![401, 404].includes(err.status)
          ? `Not counted: ${err.message}` : explain(err);
      out.classList.add("failed");
    } finally {
      button.disabled = false;
    }
  }

  // ------------------------------------------------------------------ a dataset
  function showMyQuota(datasetId) {
    const box = $("my-quota");
    const grant = grantOf(datasetId);
    if (!grant) {
      box.hidden = true;
      return;
    }
    const key = JSON.stringify(grant);
    if (box.dataset.key !== key || box.dataset.id !== datasetId) {
      const head = document.createElement("h3");
      head.textContent = "Your quota on this dataset";
      box.replaceChildren(head, ...quotaNodes(grant));
      box.dataset.key = key;
      box.dataset.id = datasetId;
    }
    box.hidden = false;
  }

  function noReport() {
    $("report-parts").hidden = true;
    const note = $("role-note");
    note.textContent = "Reports and ledgers are for curators and auditors. Your key sees the"
      + " dataset's reading above and, where you have a grant, your quota's; both refresh live.";
    note.hidden = false;
  }

  // The detail is loaded: say so (tests and scripts wait for it) and, on a narrow screen,
  // bring its title into view if what loaded moved it away (the list below the detail can
  // hold the scroll position while the detail grows above it).
  function loaded(ds) {
    document.body.dataset.loaded = ds.id;
    if (!narrow() || state.dataset !== ds) return;
    const top = $("detail-title").getBoundingClientRect().top;
    if (top < 0 || top > window.innerHeight - 40) $("detail").scrollIntoView({ block: "start" });
  }

  async function selectDataset(ds, fromRoute) {
    say("");
    state.dataset = ds;
    state.reportReadable = false;
    state.reportKey = null;
    stopLive();
    delete document.body.dataset.loaded;
    for (const tr of $("datasets").querySelectorAll("tbody tr")) {
      tr.classList.toggle("selected", tr.dataset.id === ds.id);
    }
    if (!fromRoute) setRoute(ds.id);
    const partitioned = Boolean(ds.partition);
    $("home").hidden = true;
    $("detail").hidden = false;
    document.body.classList.add("has-detail");
    $("detail-title").textContent = `${ds.name} (${ds.mode}${partitioned ? ", partitioned" : ""})`;
    for (const id of ["stale", "role-note", "my-quota", "fit-form", "blocks", "report-parts"]) {
      $(id).hidden = true;
    }
    $("detail-gauge").replaceChildren();
    frozenBanner(null);
    $("updated").textContent = "";
    $("live-note").textContent = "";
    if (narrow()) $("detail").scrollIntoView({ block: "start" });
    const base = `/v1/datasets/${encodeURIComponent(ds.id)}/report`;
    const fresh = await api(`/v1/datasets/${encodeURIComponent(ds.id)}`);
    if (state.dataset !== ds) return;
    startLive(ds, fresh);
    setupFit(fresh);
    if (state.role === "analyst") showMyQuota(ds.id);
    $("partition-note").hidden = !partitioned;
    $("spend-chart").hidden = partitioned; // no whole-dataset spend to draw
    // a partitioned dataset: its blocks first (any reader may see them)
    if (partitioned) await setupBlocks(fresh);
    if (state.role === "analyst") {
      noReport();
      loaded(ds);
      return;
    }
    let report;
    try {
      report = await api(base);
    } catch (err) {
      if (err.status !== 403) throw err;
      if (state.role === null) state.role = "analyst"; // no /v1/me: what the key may read says
      noReport();
      loaded(ds);
      return;
    }
    if (state.dataset !== ds) return;
    state.reportReadable = true;
    state.reportKey = live.seen;
    if (partitioned) rangeNote("", "");
    $("report-parts").hidden = false;
    $("refunds").replaceChildren(amountNode("span", report.refunds.odp_savings, false));
    if (!$("refunds").textContent) $("refunds").textContent = "none";
    $("chain-head").textContent = `seq ${report.chain_head.seq}, ${report.chain_head.hash}`;
    const verdict = $("verdict");
    verdict.textContent = verdictText(report.verification);
    verdict.className = report.verification && report.verification.ok ? "ok" : "failed";
    state.head = report.chain_head.seq;
    clearFilters();
    spendNote(report);
    await Promise.all([
      partitioned ? $("spend-chart").replaceChildren() : showChart("spend-chart", `${base}/spend.svg`),
      showAnalystsChart(base, report),
      showTotals(ds, report).catch((e) => say(explain(e))),
    ]);
    await firstPage().catch((e) => say(explain(e)));
    loaded(ds);
  }

  // ------------------------------------------------------------------ ledger
  function filters() {
    const params = new URLSearchParams();
    if ($("f-kind").value) params.append("kind", $("f-kind").value);
    if ($("f-actor").value) params.append("actor", $("f-actor").value);
    if ($("f-since").value) params.append("since", `${$("f-since").value}Z`);
    if ($("f-until").value) params.append("until", `${$("f-until").value}Z`);
    return params;
  }

  function filtered() { return [...filters().keys()].length > 0; }

  function clearFilters() {
    for (const id of ["f-kind", "f-actor", "f-since", "f-until"]) $(id).value = "";
  }

  function refusedAt(e) {
    // The level the 409 reported: the dataset when the entry carries its (zero) charge,
    // else the first upper level that refused (organisation, then quota).
    if (e.charge != null) return "dataset";
    if (e.org && e.org.outcome === "rejected") return "organisation";
    return "quota";
  }

  async function showPage(after) {
    const params = filters();
    params.set("after_seq", String(after));
    params.set("limit", String(PAGE));
    const ds = state.dataset;
    const body = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/ledger?${params}`);
    state.after = after;
    state.next = body.next_after_seq;
    const tbody = $("ledger").querySelector("tbody");
    tbody.replaceChildren();
    for (const e of body.entries.slice().reverse()) {
      const tr = document.createElement("tr");
      tr.dataset.seq = e.seq;
      cell(tr, e.seq, "num");
      cell(tr, e.at.replace("T", " ").replace(/\.\d+Z$/, "Z")).title = e.at;
      cell(tr, e.kind.replace("invocation_", ""), "kind").title = e.kind;
      cell(tr, nameOf(e.actor), "actor").title = e.actor;
      if (e.kind === "invocation_rejected") {
        cell(tr, `— refused at ${refusedAt(e)} level`, "charge refused");
      } else {
        tr.appendChild(chargeNode("td", e.charge, true, "num charge"));
      }
      tr.appendChild(amountNode("td", e.refund, false, "num"));
      const keys = e.request && Array.isArray(e.request.keys) ? e.request.keys : null;
      if (e.kind.startsWith("blocks_") && keys) {
        cell(tr, `${e.kind === "blocks_opened" ? "opened" : "retired"} ${keys[0]} … ${keys[1]}`,
          "reason");
      } else {
        cell(tr, e.reason, "reason");
      }
      cell(tr, e.hash.slice(0, 10) + "…", "hash").title = e.hash;
      labelCells($("ledger"), tr);
      tbody.appendChild(tr);
    }
    const seqs = body.entries.map((e) => e.seq);
    $("page-info").textContent = seqs.length
      ? `entries ${seqs[0]}–${seqs[seqs.length - 1]} of ${body.head_seq}`
      : "no entries match";
    $("page-prev").disabled = after === 0;
    $("page-next").disabled = body.next_after_seq == null;
  }

  async function firstPage() {
    state.cursors = [];
    // unfiltered: the latest page (seqs are contiguous); filtered: from the start
    await showPage(filtered() ? 0 : Math.max(0, state.head - PAGE));
  }

  async function earlier() {
    if (state.cursors.length) {
      await showPage(state.cursors.pop());
    } else if (!filtered()) {
      await showPage(Math.max(0, state.after - PAGE));
    } else {
      await showPage(0);
    }
  }

  async function later() {
    if (state.next == null) return;
    state.cursors.push(state.after);
    await showPage(state.next);
  }

  async function exportCsv() {
    const params = filters();
    params.set("format", "csv");
    params.set("limit", "100000");
    const ds = state.dataset;
    const text = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/ledger?${params}`, "text/csv");
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
    link.download = `${ds.id}-ledger.csv`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  }

  function start() {
    for (const kind of KINDS) $("f-kind").appendChild(new Option(kind, kind));
    startBlocks();
    const reload = () => loadAll().catch((e) => say(explain(e)));
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(KEY, $("api-key").value.trim());
      $("api-key").value = "";
      reload();
    });
    $("refresh").addEventListener("click", reload);
    $("go-home").addEventListener("click", () => showHome(false));
    $("back-home").addEventListener("click", () => showHome(false));
    $("reload-report").addEventListener("click", () => {
      if (state.dataset) selectDataset(state.dataset, true).catch((e) => say(explain(e)));
    });
    $("forget-key").addEventListener("click", () => {
      sessionStorage.removeItem(KEY);
      stopLive();
      state.me = null;
      state.role = null;
      state.dataset = null;
      $("main").hidden = true;
      $("detail").hidden = true;
      $("blocks").hidden = true;
      $("toolbar").hidden = true;
      $("whoami").hidden = true;
      $("login").hidden = false;
      setRoute(null);
      say("Key forgotten.");
    });
    window.addEventListener("popstate", () => {
      if (!$("main").hidden) route().catch((e) => say(explain(e)));
    });
    $("ledger-filters").addEventListener("submit", (event) => {
      event.preventDefault();
      say("");
      firstPage().then(() => { document.body.dataset.page = `${state.after}`; })
        .catch((e) => say(explain(e)));
    });
    $("f-clear").addEventListener("click", () => {
      clearFilters();
      firstPage().catch((e) => say(explain(e)));
    });
    $("f-csv").addEventListener("click", () => exportCsv().catch((e) => say(explain(e))));
    $("fit-form").addEventListener("submit", (event) => {
      event.preventDefault();
      countFit();
    });
    $("page-prev").addEventListener("click", () => earlier().catch((e) => say(explain(e))));
    $("page-next").addEventListener("click", () => later().catch((e) => say(explain(e))));
    if (sessionStorage.getItem(KEY)) reload();
  }

  // The rounding rule, readable by tests (it must agree with the charts' app.reports_svg.shown).
  window.odometerDashboard = Object.freeze({ shown });
  document.addEventListener("DOMContentLoaded", start);
})();
