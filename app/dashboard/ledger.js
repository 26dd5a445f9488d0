// The ledger table: filters, pages and the exact CSV export.

import { amountNode } from "./amounts.js";
import { $, api, cell, labelCells, nameOf, state } from "./common.js";
import { chargeNode } from "./report.js";

const PAGE = 20;

export const KINDS = ["dataset_created", "budget_changed", "grant_changed", "invocation_accepted",
  "invocation_reserved", "invocation_rejected", "invocation_settled", "invocation_cancelled",
  "blocks_opened", "blocks_retired"];

function filters() {
  const params = new URLSearchParams();
  if ($("f-kind").value) params.append("kind", $("f-kind").value);
  if ($("f-actor").value) params.append("actor", $("f-actor").value);
  if ($("f-since").value) params.append("since", `${$("f-since").value}Z`);
  if ($("f-until").value) params.append("until", `${$("f-until").value}Z`);
  return params;
}

function filtered() { return [...filters().keys()].length > 0; }

export function clearFilters() {
  for (const id of ["f-kind", "f-actor", "f-since", "f-until"]) $(id).value = "";
}

function refusedAt(e) {
  // The level the 409 reported: the dataset when the entry carries its (zero) charge,
  // else the first upper level that refused (organisation, then quota).
  if (e.charge != null) return "dataset";
  if (e.org && e.org.outcome === "rejected") return "organisation";
  return "quota";
}

async function showPage(after) {
  const params = filters();
  params.set("after_seq", String(after));
  params.set("limit", String(PAGE));
  const ds = state.dataset;
  const body = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/ledger?${params}`);
  state.after = after;
  state.next = body.next_after_seq;
  const tbody = $("ledger").querySelector("tbody");
  tbody.replaceChildren();
  for (const e of body.entries.slice().reverse()) {
    const tr = document.createElement("tr");
    tr.dataset.seq = e.seq;
    // the entry's charge and refund as the API's text (an entry is hashed as it is: the page
    // carries them by seq); none from an older server: exact
    const text = (body.shown || {})[e.seq] || {};
    cell(tr, e.seq, "num");
    cell(tr, e.at.replace("T", " ").replace(/\.\d+Z$/, "Z")).title = e.at;
    cell(tr, e.kind.replace("invocation_", ""), "kind").title = e.kind;
    cell(tr, nameOf(e.actor), "actor").title = e.actor;
    if (e.kind === "invocation_rejected") {
      cell(tr, `— refused at ${refusedAt(e)} level`, "charge refused");
    } else {
      tr.appendChild(chargeNode("td", e.charge, text.charge, "num charge"));
    }
    tr.appendChild(amountNode("td", e.refund, text.refund, "num"));
    const keys = e.request && Array.isArray(e.request.keys) ? e.request.keys : null;
    if (e.kind.startsWith("blocks_") && keys) {
      cell(tr, `${e.kind === "blocks_opened" ? "opened" : "retired"} ${keys[0]} … ${keys[1]}`,
        "reason");
    } else {
      cell(tr, e.reason, "reason");
    }
    cell(tr, e.hash.slice(0, 10) + "…", "hash").title = e.hash;
    labelCells($("ledger"), tr);
    tbody.appendChild(tr);
  }
  const seqs = body.entries.map((e) => e.seq);
  $("page-info").textContent = seqs.length
    ? `entries ${seqs[0]}–${seqs[seqs.length - 1]} of ${body.head_seq}`
    : "no entries match";
  $("page-prev").disabled = after === 0;
  $("page-next").disabled = body.next_after_seq == null;
}

export async function firstPage() {
  state.cursors = [];
  // unfiltered: the latest page (seqs are contiguous); filtered: from the start
  await showPage(filtered() ? 0 : Math.max(0, state.head - PAGE));
}

export async function earlier() {
  if (state.cursors.length) {
    await showPage(state.cursors.pop());
  } else if (!filtered()) {
    await showPage(Math.max(0, state.after - PAGE));
  } else {
    await showPage(0);
  }
}

export async function later() {
  if (state.next == null) return;
  state.cursors.push(state.after);
  await showPage(state.next);
}

export async function exportCsv() {
  const params = filters();
  params.set("format", "csv");
  params.set("limit", "100000");
  const ds = state.dataset;
  const text = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/ledger?${params}`, "text/csv");
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
  link.download = `${ds.id}-ledger.csv`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}
