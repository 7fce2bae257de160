"use strict";
// Shared by every report page. Every string from the data is set with textContent, never as HTML.
const DATA = JSON.parse(document.getElementById("report-data").textContent);
const ROW_H = 24;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function add(parent, ...children) {
  for (const child of children) if (child) parent.appendChild(child);
  return parent;
}

function fmtMs(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return "-";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  const m = Math.floor(ms / 60000);
  return m + " min " + Math.round((ms % 60000) / 1000) + " s";
}

function fmtCost(x) { return x === null || x === undefined ? "-" : "$" + Number(x).toFixed(4); }
function fmtInt(x) { return x === null || x === undefined ? "-" : Number(x).toLocaleString("en-US"); }
function fmtRate(x) { return x === null || x === undefined ? "-" : Math.round(x * 100) + "%"; }

function header(title, meta, totals) {
  const top = el("header", "top");
  add(top, el("h1", null, title));
  for (const line of meta) if (line) add(top, el("div", "meta", line));
  const box = el("div", "totals");
  for (const [name, value, bad] of totals) {
    const t = el("div", "total" + (bad ? " bad" : ""));
    t.dataset.total = name;
    add(t, el("b", null, value), el("span", null, name));
    box.appendChild(t);
  }
  top.appendChild(box);
  document.body.appendChild(top);
}

function skippedBox(parent, skipped) {
  if (!skipped || !skipped.length) return;
  const box = el("div", "skipped");
  box.id = "skipped";
  add(box, el("b", null, "Not shown: " + skipped.length + " thing(s) this page could not read"));
  const list = el("ul");
  for (const s of skipped) list.appendChild(el("li", null, s));
  box.appendChild(list);
  parent.appendChild(box);
}

function textBlock(parent, title, text) {
  if (text === undefined || text === null || text === "") return;
  add(parent, el("h2", null, title));
  parent.appendChild(el("pre", null, text));
}

function kv(parent, pairs) {
  const dl = el("dl", "kv");
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    add(dl, el("dt", null, k), el("dd", null, v));
  }
  parent.appendChild(dl);
}

// A list of many rows of one height: only the rows in view exist in the page.
// The board (rows on a time axis) beside the details pane, both in one layout added to main.
function boardAndDetails(main, labelWidth, hint) {
  const layout = el("div", "layout");
  const board = el("div", "board");
  board.style.setProperty("--label", labelWidth);
  const details = el("aside", "details");
  details.id = "details";
  add(details, el("div", "meta", hint));
  add(layout, board, details);
  main.appendChild(layout);
  return { board, details };
}

class VirtualList {
  constructor(parent, draw) {
    this.viewport = el("div", "viewport");
    this.spacer = el("div", "spacer");
    this.viewport.appendChild(this.spacer);
    parent.appendChild(this.viewport);
    this.draw = draw;
    this.items = [];
    this.drawn = new Map();
    this.pending = false;
    this.viewport.addEventListener("scroll", () => this.schedule());
    window.addEventListener("resize", () => this.schedule());
  }
  set(items) {
    this.items = items;
    this.spacer.style.height = items.length * ROW_H + "px";
    this.spacer.replaceChildren();
    this.drawn.clear();
    this.render();
  }
  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.render(); });
  }
  render() {
    const top = this.viewport.scrollTop;
    const height = this.viewport.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW_H) - 10);
    const last = Math.min(this.items.length, Math.ceil((top + height) / ROW_H) + 10);
    for (const [index, node] of this.drawn) {
      if (index < first || index >= last) { node.remove(); this.drawn.delete(index); }
    }
    for (let i = first; i < last; i++) {
      if (this.drawn.has(i)) continue;
      const node = this.draw(this.items[i], i);
      node.style.top = i * ROW_H + "px";
      node.dataset.index = String(i);
      this.spacer.appendChild(node);
      this.drawn.set(i, node);
    }
  }
}

function axis(parent, span) {
  const bar = el("div", "axis");
  const steps = 5;
  for (let i = 0; i <= steps; i++) {
    const tick = el("span", "tick", fmtMs(span.from + (span.to - span.from) * i / steps));
    tick.style.left = (i * 100 / steps) + "%";
    bar.appendChild(tick);
  }
  parent.appendChild(bar);
  return bar;
}

function place(node, span, from, to) {
  const width = Math.max(span.to - span.from, 1);
  const left = Math.min(Math.max((from - span.from) / width, 0), 1);
  node.style.left = (left * 100).toFixed(3) + "%";
  if (to !== undefined) {
    const right = Math.min(Math.max((to - span.from) / width, 0), 1);
    node.style.width = "max(2px, " + ((right - left) * 100).toFixed(3) + "%)";
  }
  return node;
}
