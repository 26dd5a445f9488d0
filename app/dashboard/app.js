// Privacy odometer dashboard: read-only, vanilla JS, no inline script (see the page's CSP).
// Every value from the server is written with textContent; the SVG charts are parsed as XML,
// stripped of anything active and imported as nodes, never assigned as HTML.
"use strict";

(function () {
  const KEY = "odometer.apiKey";
  const RECENT = 20;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const UNIT = { epsilon: "ε", delta: "δ", rho: "ρ", mu_squared: "μ²" };
  const $ = (id) => document.getElementById(id);

  function amounts(obj) {
    if (!obj || typeof obj !== "object") return "";
    return Object.keys(obj)
      .filter((k) => typeof obj[k] === "string" || typeof obj[k] === "number")
      .map((k) => `${UNIT[k] || k} ${obj[k]}`)
      .join(", ");
  }

  function say(text) {
    $("message").textContent = text || "";
  }

  class HttpError extends Error {
    constructor(status, body) {
      super(`${status} ${body && body.error ? body.error + ": " + body.detail : ""}`);
      this.status = status;
    }
  }

  async function api(path, accept) {
    const key = sessionStorage.getItem(KEY);
    const response = await fetch(path, {
      headers: { Authorization: `Bearer ${key}`, Accept: accept || "application/json" },
      credentials: "omit",
      cache: "no-store",
    });
    if (!response.ok) {
      let body = null;
      try { body = await response.json(); } catch (e) { body = null; }
      throw new HttpError(response.status, body);
    }
    return accept === "image/svg+xml" ? response.text() : response.json();
  }

  function explain(err) {
    if (err.status === 401) return "The key was refused (unknown, revoked or expired).";
    if (err.status === 403) return "This key's role may not read reports and ledgers (curator or auditor needed).";
    if (err.status === 404) return "Not found (or not visible to this key).";
    return `Request failed: ${err.message}`;
  }

  function cell(row, text, cls) {
    const td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  function spentOf(status) {
    if (!status.mode) return "unreadable (see the replay verification)";
    if (status.mode === "basic") {
      return `${amounts(status.spent)} (reserved ε ${status.reserved.epsilon})`;
    }
    if (status.spent) return amounts(status.spent);
    return "see sub-budgets";
  }

  function remainingOf(status) {
    if (status.remaining) return amounts(status.remaining);
    const parts = Object.entries(status.sub_budgets || {}).map(
      ([name, sub]) => `${name}: ${remainingOf(sub)}`);
    return parts.join("; ");
  }

  async function loadDatasets() {
    say("");
    const body = await api("/v1/datasets?limit=1000");
    const tbody = $("datasets").querySelector("tbody");
    tbody.replaceChildren();
    for (const ds of body.datasets) {
      const tr = document.createElement("tr");
      tr.dataset.id = ds.id;
      cell(tr, ds.name, "name");
      cell(tr, ds.id, "hash");
      cell(tr, ds.mode);
      cell(tr, amounts(ds.status.budget), "num");
      cell(tr, spentOf(ds.status), "num");
      cell(tr, remainingOf(ds.status), "num remaining");
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Show";
      button.className = "show";
      button.addEventListener("click", () => selectDataset(ds).catch((e) => say(explain(e))));
      cell(tr, "").appendChild(button);
      tbody.appendChild(tr);
    }
    $("main").hidden = false;
    $("login").hidden = true;
    if (!body.datasets.length) say("No datasets are visible to this key.");
  }

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

  function verdictText(v) {
    if (v.ok) return `OK — ${v.entries} entries replayed, head hash matches`;
    return `FAILED (${v.problem_count} problems): ${v.first_problem}`;
  }

  async function showLedger(ds, head) {
    const after = Math.max(0, head - RECENT);
    const body = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/ledger?after_seq=${after}&limit=${RECENT}`);
    const tbody = $("ledger").querySelector("tbody");
    tbody.replaceChildren();
    for (const e of body.entries.slice().reverse()) {
      const tr = document.createElement("tr");
      cell(tr, e.seq, "num");
      cell(tr, e.at);
      cell(tr, e.kind);
      cell(tr, e.actor);
      cell(tr, amounts(e.charge), "num");
      cell(tr, amounts(e.refund), "num");
      cell(tr, e.reason);
      cell(tr, e.hash.slice(0, 12) + "…", "hash").title = e.hash;
      tbody.appendChild(tr);
    }
  }

  async function selectDataset(ds) {
    say("");
    for (const tr of $("datasets").querySelectorAll("tbody tr")) {
      tr.classList.toggle("selected", tr.dataset.id === ds.id);
    }
    const base = `/v1/datasets/${encodeURIComponent(ds.id)}/report`;
    const report = await api(base);
    const status = report.status || { budget: report.guarantee.budget };
    $("detail-title").textContent = `${report.dataset.name} (${report.dataset.mode})`;
    $("budget").textContent = amounts(status.budget);
    $("spent").textContent = spentOf(status);
    $("remaining").textContent = remainingOf(status);
    $("refunds").textContent = amounts(report.refunds.odp_savings) || "none";
    $("rejections").textContent = `${report.rejections.total}` +
      (report.rejections.total ? ` (${Object.entries(report.rejections.by_level)
        .map(([k, n]) => `${k}: ${n}`).join(", ")})` : "");
    $("chain-head").textContent = `seq ${report.chain_head.seq}, ${report.chain_head.hash}`;
    const verdict = $("verdict");
    verdict.textContent = verdictText(report.verification);
    verdict.className = report.verification.ok ? "ok" : "failed";
    $("detail").hidden = false;
    await Promise.all([
      showChart("spend-chart", `${base}/spend.svg`),
      showChart("analysts-chart", `${base}/analysts.svg`),
      showLedger(ds, report.chain_head.seq).catch((e) => say(explain(e))),
    ]);
    document.body.dataset.loaded = ds.id;
  }

  function start() {
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(KEY, $("api-key").value.trim());
      $("api-key").value = "";
      loadDatasets().catch((e) => say(explain(e)));
    });
    $("refresh").addEventListener("click", () => loadDatasets().catch((e) => say(explain(e))));
    $("forget-key").addEventListener("click", () => {
      sessionStorage.removeItem(KEY);
      $("main").hidden = true;
      $("detail").hidden = true;
      $("login").hidden = false;
      say("Key forgotten.");
    });
    if (sessionStorage.getItem(KEY)) loadDatasets().catch((e) => say(explain(e)));
  }

  document.addEventListener("DOMContentLoaded", start);
})();
