// An analyst's quota: its certified reading (the analyst's own spend) and what is left of it.

import { amountNode, textOf } from "./amounts.js";
import { $, state } from "./common.js";
import { barNode, readingBlock } from "./gauges.js";

// A grant's quota: its certified reading (the analyst's own spend under it), what is left;
// or no quota (the dataset's budget alone bounds the analyst).
export function quotaNodes(grant) {
  const nodes = [];
  const quota = document.createElement("p");
  quota.className = "grant-quota";
  if (!grant.quota) {
    quota.textContent = "No quota: your charges count against the dataset's budget only (the"
      + " API keeps no separate reading of them).";
    nodes.push(quota);
    return nodes;
  }
  quota.append("Your quota ");
  quota.appendChild(amountNode("span", grant.quota.budget, textOf(grant.quota, "budget"),
    "quota-budget"));
  nodes.push(quota);
  const summary = grant.quota.summary;
  const block = readingBlock(summary, null,
    { label: "Your spend: certified reading of your quota", cls: "q-odometer",
      of: "of your quota" });
  // the bar: the quota's one fraction spent (summary.fraction_spent; floats size bars only)
  const used = summary.fraction_spent;
  if (used != null) {
    const bar = barNode(1, [["spent", Number(used)]]);
    bar.title = `${summary.shown.fraction_spent} of the quota spent`;
    bar.dataset.fraction = used;
    block.appendChild(bar);
  }
  block.classList.add("gauge", "quota-gauge");
  nodes.push(block);
  return nodes;
}

function grantOf(datasetId) {
  const grants = state.me && Array.isArray(state.me.grants) ? state.me.grants : [];
  return grants.find((g) => g.dataset_id === datasetId) || null;
}

export function showMyQuota(datasetId) {
  const box = $("my-quota");
  const grant = grantOf(datasetId);
  if (!grant) {
    box.hidden = true;
    return;
  }
  const key = JSON.stringify(grant);
  if (box.dataset.key !== key || box.dataset.id !== datasetId) {
    const head = document.createElement("h3");
    head.textContent = "Your quota on this dataset";
    box.replaceChildren(head, ...quotaNodes(grant));
    box.dataset.key = key;
    box.dataset.id = datasetId;
  }
  box.hidden = false;
}
