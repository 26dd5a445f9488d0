// Amounts: exact decimal strings from the API, rounded for display in the direction that never
// flatters (spent and reserved up, budgets and what remains down), with the exact string in the
// element's title; no amount is ever added up in floating point.

const DIGITS = 6;
export const READING_DIGITS = 8; // the summary's: a reading rounded up, what is left rounded down

export const UNIT = { epsilon: "ε", rho: "ρ", mu_squared: "μ²", delta: "δ" }; // the order shown

export function parseDec(text) {
  const m = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(String(text).trim());
  if (!m || (m[2] === "" && !m[3])) return null;
  const frac = m[3] || "";
  let digits = (m[2] + frac).replace(/^0+/, "");
  let exp = parseInt(m[4] || "0", 10) - frac.length;
  if (digits === "") return { neg: false, digits: "0", exp: 0 };
  while (digits.endsWith("0")) { digits = digits.slice(0, -1); exp += 1; }
  return { neg: m[1] === "-", digits, exp };
}

export function formatDec(d) {
  if (d.digits === "0") return "0";
  const sign = d.neg ? "-" : "";
  const adjusted = d.digits.length - 1 + d.exp;
  if (adjusted >= -7 && adjusted < 15) {
    if (d.exp >= 0) return sign + d.digits + "0".repeat(d.exp);
    const point = d.digits.length + d.exp;
    if (point > 0) return sign + d.digits.slice(0, point) + "." + d.digits.slice(point);
    return sign + "0." + "0".repeat(-point) + d.digits;
  }
  const rest = d.digits.slice(1);
  return `${sign}${d.digits[0]}${rest ? "." + rest : ""}e${adjusted >= 0 ? "+" : ""}${adjusted}`;
}

// At most `digits` (DIGITS) significant digits, towards +∞ (up) or −∞ (down): never
// flattering.
export function shown(text, up, significant) {
  const keep = significant || DIGITS;
  const d = parseDec(text);
  if (d === null) return String(text);
  if (d.digits.length <= keep) return formatDec(d);
  const dropped = d.digits.slice(keep);
  let kept = BigInt(d.digits.slice(0, keep));
  if (/[1-9]/.test(dropped) && up !== d.neg) kept += 1n;
  let digits = kept.toString();
  let exp = d.exp + dropped.length;
  while (digits.endsWith("0")) { digits = digits.slice(0, -1); exp += 1; }
  return formatDec({ neg: d.neg, digits, exp });
}

// a − b exactly (the rdp mode's ε estimate of what remains; a basic cap's reading less its
// reservations), never below zero.
export function minus(a, b) {
  const x = parseDec(a), y = parseDec(b);
  if (x === null || y === null) return null;
  const e = Math.min(x.exp, y.exp);
  const big = (d) => (d.neg ? -1n : 1n) * BigInt(d.digits) * 10n ** BigInt(d.exp - e);
  let diff = big(x) - big(y);
  if (diff < 0n) diff = 0n;
  return diff === 0n ? "0" : formatDec(parseDec(`${diff}e${e}`));
}

function amountText(obj, up) {
  if (!obj || typeof obj !== "object") return "";
  return Object.keys(UNIT).filter((k) => typeof obj[k] === "string" || typeof obj[k] === "number")
    .map((k) => `${UNIT[k]} ${shown(obj[k], up)}`).join(", ");
}

function exactText(obj) {
  if (!obj || typeof obj !== "object") return "";
  return Object.keys(UNIT).filter((k) => obj[k] != null && typeof obj[k] !== "object")
    .map((k) => `${UNIT[k]} ${obj[k]}`).join(", ");
}

// An element showing an amount rounded, with the exact value on hover.
export function amountNode(tag, obj, up, cls) {
  const el = document.createElement(tag);
  el.textContent = amountText(obj, up);
  el.title = exactText(obj);
  if (cls) el.className = cls;
  return el;
}
