// The dataset list and each role's home (an analyst's grants, an auditor's reports).

import { $, api, cell, explain, labelCells, say, state } from "./common.js";
import { gaugeFor, readingNode } from "./gauges.js";
import { blocksSummary } from "./partition.js";
import { loadOrganisation } from "./organisation.js";
import { quotaNodes } from "./quota.js";
import { route } from "./navigation.js";
import { verdictText } from "./report.js";
import { selectDataset } from "./detail.js";

const MAX_REPORTS = 20; // an auditor's home reads this many reports (3 at a time)

// One row per dataset: its name, mode and reading (the list is the master of a master-detail
// layout: on a wide window it stays on the left, the selected dataset's detail or the
// role's home on the right; on a phone they stack).
export function listGauge(ds) {
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
export function updateRow(fresh) {
  const i = state.datasets.findIndex((d) => d.id === fresh.id);
  if (i >= 0) state.datasets[i] = { ...state.datasets[i], status: fresh.status };
  const td = $("datasets").querySelector(`tr[data-id="${CSS.escape(fresh.id)}"] td.gauge-cell`);
  if (td) td.replaceChildren(listGauge({ ...fresh, partition: fresh.partition }));
}

// GET /v1/me: who the key is (null from a server without it: the role is then inferred
// from what the key may read).
export async function whoami() {
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
        ds.status.summary && ds.status.summary.guarantee, "ds-odometer",
        ds.status.shown && ds.status.shown.reading));
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
        "r-odometer", ds.status.shown && ds.status.shown.reading);
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

export async function loadAll() {
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
