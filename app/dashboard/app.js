// Privacy odometer dashboard: read-only, vanilla JS, no inline script (see the page's CSP).
// Every value from the server is written with textContent; the SVG charts are parsed as XML,
// stripped of anything active and imported as nodes, never assigned as HTML (the page's own
// chart is built node by node).
// Every budget leads with ONE reading to quote: the status summary's text and its certified
// guarantee (status.summary: the odometer reading rounded up to 8 significant digits, what is
// left rounded down), shown as the API gives them. Every other amount is printed as the API's
// text for it (its object's shown[field], rounded on the server by the core's one rule in the
// direction that never flatters), with the exact string in the element's title; the page
// rounds, adds up and subtracts no amount (floats only size bars).
//
// This module starts the page; the views are native ES modules beside it (no build step):
// amounts, common (state, HTTP), gauges, partition, strip and blocks (partitioned datasets),
// organisation, quota, homes (the list and each role's home), navigation, detail (a dataset),
// live (its refresh), fit, report, charts and ledger. Some import each other (the list opens
// a dataset, whose refresh redraws its row): they only call one another once the page has
// started, never while the modules load, so the cycles are harmless.

import { $, explain, KEY, say, state } from "./common.js";
import { startBlocks } from "./blocks.js";
import { loadAll } from "./homes.js";
import { route, setRoute, showHome } from "./navigation.js";
import { stopLive } from "./live.js";
import { countFit } from "./fit.js";
import { selectDataset } from "./detail.js";
import { clearFilters, earlier, exportCsv, firstPage, KINDS, later } from "./ledger.js";

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

document.addEventListener("DOMContentLoaded", start);
