// The heat strip of a partitioned dataset's blocks: cells, calendar groups and their titles.

import { $ } from "./common.js";
import {
  blockIndex, blockKey, DAY_MS, dayOf, exceeds, fractionText, shadeOf,
} from "./partition.js";

const MAX_CELLS = 400;

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
  "Nov", "Dec"];
const MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July",
  "August", "September", "October", "November", "December"];

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

// The strip of a page of runs; selecting a cell calls onCell(cell, runs, button).
export function drawStrip(partition, runs, onCell) {
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
    button.addEventListener("click", () => onCell(c, runs, button));
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
