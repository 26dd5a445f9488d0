// A partitioned dataset's blocks panel: its header and legend, the strip's pages, a run's
// drill-down and the runs table.

import { amountNode, textOf, UNIT } from "./amounts.js";
import { $, api, cell, explain, say } from "./common.js";
import { gaugeFor } from "./gauges.js";
import { fractionText, partitionText, SHADES, swatch } from "./partition.js";
import { drawStrip } from "./strip.js";
import { rangeTotals } from "./report.js";

// runs a page (GET …/blocks?limit=); /dashboard?runs=N asks for N (1 … 1000) instead
const RUNS_PAGE = Math.min(1000, Math.max(1,
  parseInt(new URLSearchParams(window.location.search).get("runs") || "200", 10) || 200));

const blockState = { ds: null, partition: null, from: "", to: "", prev: [], next: null,
  runs: [], token: 0 };

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
  line.appendChild(amountNode("span", status.budget, textOf(status, "budget"), "b-budget"));
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
  box.appendChild(gaugeFor({ ...run.status, shown: run.shown }, "each block of the run:",
    run.fraction_spent));
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
    link.textContent = `${runRange(runs[r])} (${runs[r].fraction_spent})`; // the API's text
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
    f.append(swatch(run.fraction_spent), run.fraction_spent); // as the API writes it
    f.title = `${run.fraction_spent} (exact)`;
    // what remains, in the unit the filter counts, rounded down by the API
    const counted = run.shown && run.shown.counted;
    if (counted) {
      cell(tr, `${UNIT[counted.unit]} ${counted.remaining}`).title = "rounded down by the API";
    } else {
      cell(tr, "");
    }
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
  const drawn = drawStrip(partition, body.runs, showCell);
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

export async function setupBlocks(ds) {
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

export function startBlocks() {
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
