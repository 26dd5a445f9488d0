// What every view shares: the page's state, the API key, HTTP, messages and table cells.

export const KEY = "odometer.apiKey";

export const $ = (id) => document.getElementById(id);
export const state = { names: {}, dataset: null, head: 0, cursors: [], after: 0, next: null,
  reportReadable: false, me: null, role: null, datasets: [], orgNames: {}, reportKey: null,
  homeToken: 0 };

export const pad2 = (n) => String(n).padStart(2, "0");

export function say(text) { $("message").textContent = text || ""; }

export class HttpError extends Error {
  constructor(status, body) {
    super(`${status} ${body && body.error ? body.error + ": " + body.detail : ""}`);
    this.status = status;
  }
}

// GET path; with a payload, POST it as JSON (the only write the page makes is a question:
// how many more a cap admits). `extra`: more request headers.
export async function api(path, accept, payload, extra) {
  const key = sessionStorage.getItem(KEY);
  const init = {
    headers: { ...extra, Authorization: `Bearer ${key}`, Accept: accept || "application/json" },
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

export function explain(err) {
  if (err.status === 401) return "The key was refused (unknown, revoked or expired).";
  if (err.status === 403) return "This key's role may not read reports and ledgers (curator or auditor needed).";
  if (err.status === 404) return "Not found (or not visible to this key).";
  if (err.status === 422) return `The filter was refused: ${err.message}`;
  return `Request failed: ${err.message}`;
}

export function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

export function nameOf(id) {
  const name = state.names[id];
  return name ? name : id;
}

// Each cell of a row named by its column's header (data-label): a narrow window draws the
// table's rows as cards, each value under its column's name.
export function labelCells(table, tr) {
  const heads = Array.from(table.tHead.rows[0].cells).map((th) => th.textContent);
  Array.from(tr.cells).forEach((td, i) => {
    if (heads[i]) td.dataset.label = heads[i];
  });
}
