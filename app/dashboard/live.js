// The open dataset's live refresh and its frozen banner.

import { $, api, explain, pad2, state } from "./common.js";
import { showMyQuota } from "./quota.js";
import { listGauge, updateRow, whoami } from "./homes.js";

const params = new URLSearchParams(window.location.search);
// the open dataset's status is read again every POLL_MS (/dashboard?poll=MS: 250 … 600000)
const POLL_MS = Math.min(600_000, Math.max(250,
  parseInt(params.get("poll") || "5000", 10) || 5000));

// The open dataset's status is read again every POLL_MS while the tab is visible (paused
// while it is hidden, read at once when it shows again); its gauge and its list row follow,
// "updated hh:mm:ss" says when it was last read, and new activity since the report below
// was read offers to reload it. An analyst's quota is read again with it (GET /v1/me).
// Each poll names the highest ledger seq shown (Odometer-Min-Seq), so that a server reading
// from a replica never shows an older status than the one on the page (docs/operations.md,
// *Read replicas*).
export const live = { ds: null, timer: null, seen: null, busy: false, shownSeq: 0 };

function clock(date) {
  return `${pad2(date.getHours())}:${pad2(date.getMinutes())}:${pad2(date.getSeconds())}`;
}

function liveNote() {
  $("live-note").textContent = document.hidden ? "· paused while this tab is hidden"
    : `· live, every ${POLL_MS < 1000 ? `${POLL_MS} ms` : `${POLL_MS / 1000} s`}`;
}

export function stopLive() {
  clearTimeout(live.timer);
  live.timer = null;
  live.ds = null;
  live.seen = null;
  live.shownSeq = 0;
}

function schedule() {
  clearTimeout(live.timer);
  live.timer = null;
  if (!live.ds) return;
  liveNote();
  if (!document.hidden) live.timer = setTimeout(() => { pollOnce(); }, POLL_MS);
}

async function pollOnce() {
  const ds = live.ds;
  if (!ds || document.hidden || live.busy) return;
  live.busy = true;
  try {
    const [fresh, me] = await Promise.all([
      api(`/v1/datasets/${encodeURIComponent(ds.id)}`, null, undefined,
        { "Odometer-Min-Seq": `${ds.id}:${live.shownSeq}` }),
      state.role === "analyst" ? whoami().catch(() => null) : null,
    ]);
    if (live.ds !== ds) return;
    if (me) {
      state.me = me;
      showMyQuota(ds.id);
    }
    applyStatus(fresh);
  } catch (err) {
    if (live.ds === ds) $("live-note").textContent = `· not refreshed (${explain(err)}); retrying`;
  } finally {
    live.busy = false;
    if (live.ds === ds) schedule();
  }
}

// A dataset frozen behind its witness (status.frozen): a banner above its reading, which
// may be rolled back (the database lost entries the witness holds); hidden otherwise.
export function frozenBanner(frozen) {
  const banner = $("frozen-banner");
  if (!frozen) {
    banner.hidden = true;
    banner.replaceChildren();
    return;
  }
  const head = document.createElement("strong");
  head.textContent = "Frozen behind its witness: writes are refused.";
  const heads = document.createElement("span");
  heads.textContent = ` ${frozen.reason} (witness seq ${frozen.witnessed_seq}, database seq `
    + `${frozen.database_seq}${frozen.sibling ? `, behind: ${frozen.sibling}` : ""}): `
    + `${frozen.reading}.`;
  const detail = document.createElement("span");
  detail.className = "frozen-detail";
  detail.textContent = ` ${frozen.detail}`;
  banner.replaceChildren(head, heads, detail);
  banner.hidden = false;
}

// A status just read: the detail's gauge and the list's row when it changed; the time.
function applyStatus(fresh) {
  const seq = (fresh.ledger && fresh.ledger.last_seq) || 0;
  if (seq < live.shownSeq) return; // never shown older than what the page shows
  live.shownSeq = seq;
  const key = JSON.stringify(fresh.status);
  if (key !== live.seen) {
    live.seen = key;
    frozenBanner(fresh.status && fresh.status.frozen);
    $("detail-gauge").replaceChildren(listGauge({ ...fresh, partition: fresh.partition }));
    updateRow(fresh);
    if (state.reportKey !== null && key !== state.reportKey) $("stale").hidden = false;
  }
  const now = new Date();
  const updated = $("updated");
  updated.textContent = `updated ${clock(now)}`;
  updated.title = `status read at ${now.toISOString()}`;
  updated.dataset.at = String(now.getTime());
}

export function startLive(ds, fresh) {
  stopLive();
  live.ds = ds;
  applyStatus(fresh);
  schedule();
}

document.addEventListener("visibilitychange", () => {
  if (!live.ds) return;
  if (document.hidden) schedule(); else pollOnce();
});
