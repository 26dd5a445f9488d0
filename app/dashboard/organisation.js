// The organisation cards: cap, certified reading, statement, replay, usage, the cap's "how many
// more?" and the analysts' quotas.

import { amountNode, textOf } from "./amounts.js";
import { $, api, cell, explain, HttpError, nameOf, state } from "./common.js";
import { barNode, measure, readingNode } from "./gauges.js";

const MAX_GRANT_READS = 50; // the organisation view reads the grants of this many datasets

// The organisation view: cap, datasets, principals and the analysts' quotas, from the
// organisations, principals, datasets and grants endpoints (grants: curators and auditors).
// A cap is one filter in its mode's currency over every dataset of the organisation: the
// card shows its certified (ε, δ) reading against the cap's ε, what the filter counts, the
// datasets that used it and, for curators and auditors, the cap's replay from the ledgers.
export async function loadOrganisation(datasets) {
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
  cap.appendChild(amountNode("span", org.cap, textOf(org, "cap"), "org-cap-amount"));
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
    counted.appendChild(amountNode("span", org.spent, textOf(org, "spent"), "org-spent"));
    if (org.reserved) {
      counted.append("; reserved ");
      counted.appendChild(amountNode("span", org.reserved, textOf(org, "reserved"),
        "org-reserved"));
      if (org.reserved.open) counted.append(` (${org.reserved.open} open)`);
    }
    if (org.remaining) {
      counted.append("; remaining ");
      counted.appendChild(amountNode("span", org.remaining, textOf(org, "remaining"),
        "org-remaining"));
    }
    if (mode !== "basic" && status.mode === mode) {
      // the cap's (ε, δ) as the filter's own budget in its currency
      const [unit, , , , budget] = measure(status);
      const shown = (status.shown || {}).counted;
      counted.append(" of the cap's ");
      counted.appendChild(amountNode("span", { [unit]: budget },
        shown ? { [unit]: shown.budget } : null, "org-budget"));
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
  line.append(label, " ", readingNode(statement, null, "g-odometer org-statement-value",
    org.shown && org.shown.statement));
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
  org.closed.forEach((phase, i) => {
    const row = body.insertRow();
    cell(row, `${phase.mode}, until #${phase.after_seq}`, "phase-mode");
    // rounded up by the API as every certified reading is (org.shown), exact on hover
    for (const part of ["epsilon", "delta"]) {
      cell(row, org.shown.closed[i][part], `num phase-${part}`).title = phase[part];
    }
  });
  const scroller = document.createElement("div");
  scroller.className = "table-box";
  scroller.appendChild(table);
  box.appendChild(scroller);
  return box;
}

// The certified reading (valid whenever the analysts stop, rounded up) and the bar of the
// cap's fraction spent. A basic cap's reading counts its open ODP reservations at their worst
// cell: that part of the bar is drawn as reserved, as on the dataset gauges.
function readingGauge(org) {
  const box = document.createElement("div");
  box.className = "gauge org-reading";
  const reading = org.status && org.status.odometer;
  if (!reading) {
    box.textContent = "no certified reading (see the cap's replay)";
    return box;
  }
  const reserved = org.reserved && org.reserved.epsilon != null ? org.reserved.epsilon : "0";
  const given = org.status.shown || {}; // the cap's figures as the API rounds them
  const line = document.createElement("p");
  line.className = "reading";
  const label = document.createElement("span");
  label.className = "reading-label";
  // once a cap was replaced, the organisation's statement (below) is the one to quote
  label.textContent = (org.closed || []).length ? "Certified reading of the cap in force"
    : "Certified reading to quote";
  // the cap's summary (GET /v1/organisations: its sentence and its certified reading, rounded
  // up by the API), shown as the API gives it, as a dataset's
  const summary = org.summary || org.status.summary || null;
  if (summary && summary.text) {
    const text = document.createElement("p");
    text.className = "summary-text";
    text.textContent = summary.text;
    box.appendChild(text);
  }
  const of = document.createElement("span");
  of.className = "reading-of";
  of.append("of the cap's ",
    amountNode("span", { epsilon: org.cap.epsilon }, textOf(org, "cap"), "org-cap-epsilon"));
  line.append(label, " ", readingNode(reading, summary && summary.guarantee,
    "g-odometer org-odometer", given.reading), " ", of);
  box.appendChild(line);
  // the bar: the cap's one fraction spent (summary.fraction_spent, in the unit its filter
  // counts; not the reading's ε over the cap's, a ladder level), a basic cap's reserved ε
  // drawn as its own part of it
  const share = summary ? summary.fraction_spent : given.fraction_spent_exact;
  if (share != null) {
    const held = org.status.mode === "basic"
      ? Math.min(Number(reserved) / Number(org.cap.epsilon) || 0, Number(share)) : 0;
    const bar = barNode(1, [["spent", Number(share) - held], ["reserved", held]]);
    bar.title = `${((summary || {}).shown || given).fraction_spent} of the cap spent`;
    bar.dataset.fraction = share;
    box.appendChild(bar);
  } else {
    box.appendChild(barNode(1, [])); // no fraction from the API: nothing to draw
  }
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
function drawnCell(row, drawn, text) {
  if (!drawn || !Array.isArray(drawn.rdp)) {
    return row.appendChild(amountNode("td", drawn, text, "num drawn"));
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
  const drawnText = {};
  for (const d of report ? report.datasets : []) {
    drawn[d.id] = d.drawn;
    drawnText[d.id] = textOf(d, "drawn");
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
    if (report) drawnCell(tr, drawn[id], drawnText[id]);
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
    if (g.quota) tr.appendChild(amountNode("td", g.quota, textOf(g, "quota"), "quota"));
    else cell(tr, "no quota", "quota");
  }
  return table;
}
