// Amounts: exact decimal strings from the API, printed as the API's text for them (`shown`:
// rounded on the server by the core's one rule for display, in the direction that never
// flatters: spent, reserved and charges up, budgets, quotas, what remains and refunds down),
// with the exact string in the element's title. The page never rounds, adds up or subtracts
// an amount; from an older server without the text it prints the exact string.

export const READING_DIGITS = 8; // the summary's: a reading rounded up, what is left rounded down

export const UNIT = { epsilon: "ε", rho: "ρ", mu_squared: "μ²", delta: "δ" }; // the order shown

// A decimal string as {neg, digits, exp} (no trailing zeros), or null: read, never rounded.
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

// Every digit of a parsed decimal, in the notation the API's text uses.
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

// Whether a > b, exactly (decimal strings; false when either is not one).
export function greater(a, b) {
  const x = parseDec(a), y = parseDec(b);
  if (x === null || y === null) return false;
  const e = Math.min(x.exp, y.exp);
  const big = (d) => (d.neg ? -1n : 1n) * BigInt(d.digits) * 10n ** BigInt(d.exp - e);
  return big(x) > big(y);
}

// The API's text of an object's amount `field` (its shown[field]: text by unit), or null.
export function textOf(obj, field) {
  const shown = obj && obj.shown;
  return (shown && shown[field]) || null;
}

function scalarUnits(obj) {
  if (!obj || typeof obj !== "object") return [];
  return Object.keys(UNIT).filter((k) => typeof obj[k] === "string" || typeof obj[k] === "number");
}

// One unit of an amount as the API's text gives it; exact without the text.
export function unitText(obj, text, unit) {
  return text && typeof text[unit] === "string" ? text[unit] : String(obj[unit]);
}

// An element showing an amount as the API's text (`text`: its shown[field]), the exact value
// on hover.
export function amountNode(tag, obj, text, cls) {
  const el = document.createElement(tag);
  const units = scalarUnits(obj);
  el.textContent = units.map((k) => `${UNIT[k]} ${unitText(obj, text, k)}`).join(", ");
  el.title = units.map((k) => `${UNIT[k]} ${obj[k]}`).join(", ");
  if (cls) el.className = cls;
  return el;
}
