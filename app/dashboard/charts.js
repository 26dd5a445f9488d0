// Charts: the server's SVG charts (app/reports_svg.py, the one place charts are drawn),
// fetched with the page's key, made safe and imported as nodes.

import { $, api } from "./common.js";

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
