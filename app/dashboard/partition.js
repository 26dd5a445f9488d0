// Partitioned datasets: block keys and their numbering, the shade of a fraction spent, and the
// summary a partitioned dataset shows instead of a whole-dataset gauge.

import { amountNode, formatDec, greater, parseDec, textOf } from "./amounts.js";
import { pad2 } from "./common.js";
import { readingBlock } from "./gauges.js";

// A partitioned dataset has one filter per block (a day, week or month, a hash bucket, a
// named part), so no whole-dataset gauge: its list row says how many blocks are open and
// the highest fraction any block has spent, and its detail draws the blocks as a heat strip
// from GET /v1/datasets/{id}/blocks (runs of consecutive blocks with one history, paged by
// the "next" key). A cell is one block, or (when a page holds more than MAX_CELLS blocks)
// neighbouring blocks drawn as one, shaded by the highest fraction among them.

export const DAY_MS = 86_400_000;
const EPOCH_MONDAY = Date.UTC(1969, 11, 29); // the Monday of block 0's ISO week

// shade k: fraction = 0, ≤ ¼, ≤ ½, ≤ ¾, < 1, = 1 (the block's budget spent out)
export const SHADES = ["0 (unspent)", "≤ 0.25", "≤ 0.5", "≤ 0.75", "< 1", "1 (spent out)"];
const KIND_WORDS = { day: "by day", week: "by ISO week", month: "by month",
  bucket: "hash buckets", named: "named parts" };

// A block key's index, as the server numbers blocks (odometer_core.partition); null when it
// is not a key of this partition (the server then says why).
export function blockIndex(partition, key) {
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

export function dayOf(index) { return new Date(index * DAY_MS); }

// The key of block ``index`` (the inverse of blockIndex).
export function blockKey(partition, index) {
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

export const exceeds = greater; // a > b, exactly

export function shadeOf(fraction) {
  const d = parseDec(fraction);
  if (d === null || d.digits === "0" || d.neg) return 0;
  if (!exceeds("1", fraction)) return 5;
  if (!exceeds(fraction, "0.25")) return 1;
  if (!exceeds(fraction, "0.5")) return 2;
  if (!exceeds(fraction, "0.75")) return 3;
  return 4;
}

// A block's fraction spent as the API gives it (the core's, already rounded up to 4 places:
// runs[].fraction_spent, blocks.highest_fraction_spent), and the same as a percentage: its
// decimal point moved, every digit kept (the page rounds nothing).
export function fractionText(fraction) {
  const d = parseDec(fraction);
  if (d === null) return String(fraction);
  const percent = d.digits === "0" ? "0" : formatDec({ ...d, exp: d.exp + 2 });
  return `${fraction} (${percent}%)`;
}

export function partitionText(partition) {
  const words = [KIND_WORDS[partition.kind] || partition.kind];
  if (partition.timezone) words.push(`in ${partition.timezone}`);
  if (partition.kind === "bucket" && partition.buckets) words.push(`(${partition.buckets})`);
  if (partition.kind === "named" && partition.names) words.push(`(${partition.names.length})`);
  return `${words.join(" ")}, unit ${partition.unit}`;
}

export function swatch(fraction) {
  const s = document.createElement("span");
  s.className = `swatch f${shadeOf(fraction)}`;
  s.setAttribute("aria-hidden", "true");
  return s;
}

// The list row's and the detail's summary of a partitioned dataset: no spent bar (there is
// no whole-dataset spend), but the blocks open and the highest fraction spent by any.
export function blocksSummary(ds) {
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
  budget.appendChild(amountNode("span", status.budget, textOf(status, "budget")));
  if (status.mode) budget.append(` (${status.mode})`);
  numbers.appendChild(budget);
  box.appendChild(numbers);
  if (status.odometer || status.summary) {
    // the highest reading over every block ever opened, retired ones included (the
    // summary's text says so; what is left is the most spent open block's)
    box.insertBefore(readingBlock(status.summary, status.odometer,
      { label: "Certified reading to quote (every block ever opened)",
        of: "of the most spent open block's budget" }), head.nextSibling);
  }
  return box;
}
