// "How many more fit?" on the open dataset (a preview: nothing is written).

import { $, api, explain, HttpError, state } from "./common.js";

// "How many more fit?": a declaration previewed on the open dataset (nothing written): how
// many of it the caller could register in a row now, nothing else admitted meanwhile, the
// level that admits the fewest and why the next would be refused (preview's fit: each
// level's filter counts exactly what its own admission would admit, up to 1000000).
// Prefilled with the last admitted declaration (the one the summary's "more" counts), else
// a Gaussian. Previews are an analyst's; a key whose role is unknown may try.
const FIT_EXAMPLE = '{"type":"gaussian","sigma":"10","sensitivity":"1"}';

export function setupFit(fresh) {
  const form = $("fit-form");
  form.hidden = !(state.role === "analyst" || state.role === null);
  const summary = fresh.status && fresh.status.summary;
  const more = summary && summary.more;
  $("fit-declaration").value = more && more.of ? JSON.stringify(more.of) : FIT_EXAMPLE;
  const subs = fresh.status && fresh.status.sub_budgets ? Object.keys(fresh.status.sub_budgets)
    : [];
  $("fit-sub-budget").replaceChildren(...subs.map((name) => new Option(name, name)));
  if (more && more.sub_budget) $("fit-sub-budget").value = more.sub_budget;
  $("fit-on").hidden = subs.length === 0;
  const out = $("fit-result");
  out.textContent = "";
  out.className = "fit-result";
  delete out.dataset.count;
  $("fit-reason").textContent = "";
}

export async function countFit() {
  const ds = state.dataset;
  const out = $("fit-result");
  const reason = $("fit-reason");
  const button = $("fit-count");
  if (!ds) return;
  out.className = "fit-result";
  delete out.dataset.count;
  reason.textContent = "";
  let mechanism;
  try {
    mechanism = JSON.parse($("fit-declaration").value);
  } catch (e) {
    out.textContent = `The declaration is not JSON: ${e.message}`;
    out.classList.add("failed");
    return;
  }
  const body = { mechanism };
  const sub = $("fit-sub-budget").value;
  if (!$("fit-on").hidden && sub) body.sub_budget = sub;
  if (ds.partition) body.blocks = "all"; // every open block: the fewest any of them admits
  out.textContent = "counting…";
  button.disabled = true;
  try {
    const r = await api(`/v1/datasets/${encodeURIComponent(ds.id)}/invocations/preview`,
      undefined, body);
    if (state.dataset !== ds) return;
    const fit = r.fit;
    if (!fit) {
      out.textContent = "This server does not count how many more fit.";
      return;
    }
    out.dataset.count = String(fit.count);
    out.dataset.level = fit.level;
    out.textContent = fit.at_least ? `at least ${fit.count} more fit in a row`
      : `${fit.count} more ${fit.count === 1 ? "fits" : "fit"} in a row`
        + ` (the ${fit.level} admits the fewest)`;
    out.title = `preview of ${JSON.stringify(mechanism)}: ${r.status} now`
      + (r.level ? ` (refused by the ${r.level})` : "");
    reason.textContent = fit.reason ? `The next one would be refused: ${fit.reason}` : "";
  } catch (err) {
    if (state.dataset !== ds) return;
    out.textContent = err instanceof HttpError && err.status === 403
      ? "Not counted: previews are an analyst's (this key may not preview)"
      : err instanceof HttpError && ![401, 404].includes(err.status)
        ? `Not counted: ${err.message}` : explain(err);
    out.classList.add("failed");
  } finally {
    button.disabled = false;
  }
}
