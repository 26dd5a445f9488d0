// Navigation: the open dataset in the address, and the way home.

import { $, explain, say, state } from "./common.js";
import { stopLive } from "./live.js";
import { selectDataset } from "./detail.js";

// The selected dataset is in the address (#ds=ID): the back button goes home again, and a
// reload opens the same dataset.
function routeId() {
  const m = /^#ds=(.+)$/.exec(window.location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

export function setRoute(id) {
  if (routeId() === id) return;
  const url = id ? `#ds=${encodeURIComponent(id)}`
    : window.location.pathname + window.location.search;
  window.history.pushState({ ds: id }, "", url);
}

export async function route() {
  const id = routeId();
  const ds = id ? state.datasets.find((d) => d.id === id) : null;
  if (ds) await selectDataset(ds, true).catch((e) => say(explain(e)));
  else showHome(true);
}

export function narrow() { return window.matchMedia("(max-width: 999px)").matches; }

export function showHome(fromRoute) {
  stopLive();
  state.dataset = null;
  $("detail").hidden = true;
  $("home").hidden = false;
  for (const tr of $("datasets").querySelectorAll("tbody tr")) tr.classList.remove("selected");
  document.body.classList.remove("has-detail");
  if (!fromRoute) {
    setRoute(null);
    if (narrow()) $("view-pane").scrollIntoView({ block: "start" });
  }
}
