// A dataset's detail: opening it, and what a key that may not read reports sees.

import { amountNode } from "./amounts.js";
import { $, api, explain, say, state } from "./common.js";
import { setupBlocks } from "./blocks.js";
import { showMyQuota } from "./quota.js";
import { narrow, setRoute } from "./navigation.js";
import { showChart } from "./charts.js";
import { rangeNote, showAnalystsChart, showTotals, spendNote, verdictText } from "./report.js";
import { frozenBanner, live, startLive, stopLive } from "./live.js";
import { setupFit } from "./fit.js";
import { clearFilters, firstPage } from "./ledger.js";

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

export async function selectDataset(ds, fromRoute) {
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
  $("refunds").replaceChildren(amountNode("span", report.refunds.odp_savings,
    ((report.shown || {}).refunds || {}).odp_savings)); // the API's text, by field
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
