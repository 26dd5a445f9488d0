// A dataset's report: verdict, counts, the per-analyst and per-kind tables and the notes.

import { amountNode, textOf, UNIT, unitText } from "./amounts.js";
import { $, api, cell, labelCells, nameOf, state } from "./common.js";
import { showChart } from "./charts.js";
import { estimateAbove } from "./gauges.js";

export function verdictText(v) {
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

// A charge as text: scalar amounts, or (rdp) a curve, which has no single amount (its
// values by order on hover).
export function chargeNode(tag, obj, text, cls, curve) {
  const rdp = curve || (obj && Array.isArray(obj.rdp) ? obj : null);
  if (!rdp) return amountNode(tag, obj, text, cls);
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  const delta = obj && typeof obj.delta === "string" && obj.delta !== "0"
    ? `, δ ${unitText(obj, text, "delta")}` : "";
  el.textContent = `RDP curve${delta}`;
  const orders = rdp.orders || [];
  el.title = `an RDP curve over ${rdp.rdp.length} orders (no single amount): ` + rdp.rdp.map((v, k) => `α ${orders[k] != null ? orders[k] : k}: ${v}`).join(", ");
  return el;
}

// The attribution cell: (ε, δ) of these charges alone, labelled not certified; as the API
// writes it (rounded up to 8 significant digits there).
function attributionCell(tr, row) {
  const a = row.attribution;
  if (!a) return cell(tr, "—", "num attribution");
  const td = cell(tr, `ε ${a.epsilon}, δ ${a.delta}`, "num attribution");
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
  for (const g of grants.grants) quotas[g.principal_id] = [g.quota, textOf(g, "quota")];
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
    const [quota, quotaText] = quotas[a.actor] || [];
    const q = cell(tr, "");
    if (quota) q.appendChild(amountNode("span", quota, quotaText)); else q.textContent = "—";
    for (const [, k] of COUNTS) cell(tr, a[k], "num n");
    const text = ((report.shown || {}).analysts || {})[a.actor] || {}; // the API's, by actor
    tr.appendChild(chargeNode("td", a.charged, text.charged, "num", a.curve));
    tr.appendChild(amountNode("td", a.refunded, text.refunded, "num"));
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
    const text = ((report.shown || {}).mechanisms || {})[m.kind] || {}; // the API's, by kind
    tr.appendChild(chargeNode("td", m.charged, text.charged, "num", m.curve));
    tr.appendChild(amountNode("td", m.refunded, text.refunded, "num"));
    if (withAttribution) attributionCell(tr, m);
    labelCells(table, tr);
    tbody.appendChild(tr);
  }
}

// The per-analyst chart: the server's (app/reports_svg.py analysts_chart), in basic mode each
// analyst's net charge and refunds, outside it each analyst's ε attribution.
export async function showAnalystsChart(base, report) {
  const note = $("analysts-note");
  note.hidden = true;
  await showChart("analysts-chart", `${base}/analysts.svg`);
  if (attributed(report, report.analysts)) {
    note.textContent = "Attribution (not certified): the (ε, δ) of each analyst's own charges"
      + " alone. The shares do not add up to the dataset's certified reading, the one to quote.";
    note.hidden = false;
  } else if (report.dataset.mode !== "basic") {
    note.textContent = "This server's report has no attribution: charges without a scalar"
      + " amount (curves) count as 0 in this chart.";
    note.hidden = false;
  }
}

export function spendNote(report) {
  const note = $("spend-note");
  const unit = report.series && report.series.unit;
  const certified = report.guarantee ? report.guarantee.certified : true;
  note.hidden = report.dataset.mode === "basic" || Boolean(report.blocks);
  if (unit && unit !== "epsilon") {
    note.textContent = `Drawn in ${UNIT[unit] || unit}, what the ${report.dataset.mode} filter`
      + " counts; the certified reading to quote is at the top.";
  } else if (!certified && report.status && estimateAbove(report.status)) {
    note.textContent = "Drawn as the running curve's RDP conversion (an estimate, not"
      + " certified), which is above the certified reading here: its spent line is not a"
      + " reading; quote the certified reading at the top.";
  } else if (!certified) {
    note.textContent = "Drawn as the (ε, δ) estimate, not certified; the certified reading"
      + " to quote is at the top.";
  } else {
    note.hidden = true;
  }
}

// The report's totals: rejections, ledger kinds, per declaration kind and per analyst (on a
// partitioned dataset, of the invocations whose blocks meet the range the report was read for).
export async function showTotals(ds, report) {
  countsTable("rejections", report.rejections.by_level);
  countsTable("reasons", report.rejections.by_reason);
  countsTable("kinds", report.ledger.kinds);
  showMechanisms(report);
  await showAnalysts(ds, report);
}

export function rangeNote(first, last) {
  const range = first || last ? `blocks ${first || "…"} … ${last || "…"}` : "any block";
  $("partition-note").textContent = "On a partitioned dataset a charge is spent by each block"
    + " it selects. The report's totals (rejections, entries by kind, per analyst and per"
    + ` declaration kind) count the invocations whose blocks meet ${range}, adding charges`
    + " made on different blocks: they are no block's spend (the strip above shows each"
    + " block's). The chart counts every block.";
  $("report-parts").dataset.range = `${first}..${last}`;
}

// A block range chosen in the strip's form: the report's totals for that range too.
export async function rangeTotals(first, last) {
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
