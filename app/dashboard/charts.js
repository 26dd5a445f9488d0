// Charts: the server's SVG charts, made safe and imported as nodes, and the page's own
// attribution chart outside basic mode.

import { shown } from "./amounts.js";
import { $, api, nameOf } from "./common.js";

const SVG_NS = "http://www.w3.org/2000/svg";

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

export async function showChart(figureId, path) {
  const figure = $(figureId);
  figure.replaceChildren();
  figure.appendChild(safeSvg(await api(path, "image/svg+xml")));
}

function svgNode(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text != null) el.textContent = text;
  return el;
}

// The page's own per-analyst chart outside basic mode: each analyst's attribution (the
// (ε, δ) of its own charges alone), a bar of its ε against the budget's ε. Not a certified
// statement: the shares do not add up to the dataset's reading (the server's chart counts
// the charges in the mode's unit, which a curve has none of).
export function attributionChart(rows, budget, datasetName) {
  const labelW = 200;
  const barW = 300;
  const rowH = 30;
  const top = 58;
  const width = labelW + barW + 230;
  const height = top + rowH * Math.max(1, rows.length) + 34;
  const svg = svgNode("svg", { viewBox: `0 0 ${width} ${height}`, width, height,
    role: "img", class: "attribution-chart",
    "aria-label": `Attribution per analyst of dataset ${datasetName} (not certified)` });
  svg.appendChild(svgNode("text", { x: 12, y: 22, class: "chart-title" },
    `Attribution per analyst (ε) of dataset ${datasetName}`));
  svg.appendChild(svgNode("text", { x: 12, y: 42, class: "chart-sub" },
    "not certified: each analyst's own charges alone; shares do not add up to the reading"));
  const whole = Math.max(Number(budget) || 0,
    ...rows.map((r) => Number(r.attribution.epsilon) || 0)) || 1;
  rows.forEach((r, i) => {
    const y = top + i * rowH;
    const g = svgNode("g", { class: "analyst" });
    const name = r.name || nameOf(r.actor);
    const short = name.length > 28 ? `${name.slice(0, 27)}…` : name;
    g.appendChild(svgNode("text", { x: labelW - 8, y: y + 17, "text-anchor": "end",
      class: "label" }, short));
    const w = Math.max(1, (barW * (Number(r.attribution.epsilon) || 0)) / whole);
    const bar = svgNode("rect", { x: labelW, y: y + 5, width: w, height: 16,
      class: "attribution-bar" });
    bar.appendChild(svgNode("title", {},
      `${name}: attribution ε ${r.attribution.epsilon}, δ ${r.attribution.delta} (not certified)`));
    g.appendChild(bar);
    g.appendChild(svgNode("text", { x: labelW + w + 6, y: y + 17, class: "value" },
      `ε ${r.attribution.epsilon}, δ ${r.attribution.delta}`)); // the API's, rounded up
    svg.appendChild(g);
  });
  const axisY = top + rowH * Math.max(1, rows.length) + 4;
  svg.appendChild(svgNode("line", { x1: labelW, y1: axisY, x2: labelW + barW, y2: axisY,
    class: "axis" }));
  svg.appendChild(svgNode("text", { x: labelW, y: axisY + 16, class: "tick" }, "0"));
  svg.appendChild(svgNode("text", { x: labelW + barW, y: axisY + 16, "text-anchor": "end",
    class: "tick" }, `ε ${shown(String(whole), false)}`));
  return svg;
}
