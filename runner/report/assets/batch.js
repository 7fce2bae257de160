"use strict";
// The batch page: how many items ended ok (with its 95% interval), by status, and every item.
(function () {
  const t = DATA.totals || {};
  const items = DATA.items || [];
  const statuses = t.statuses || {};
  const bad = items.length - (t.ok || 0);
  header("Batch " + (DATA.file || ""), [DATA.file], [
    ["items", fmtInt(t.items)], ["ok", fmtInt(t.ok)], ["not ok", fmtInt(bad), bad > 0],
    ["ok rate", fmtRate(t.rate) + (t.items ? " (" + fmtRate(t.ci95[0]) + "–" + fmtRate(t.ci95[1]) + ")" : "")],
    ["tokens", fmtInt(t.tokens)], ["cost", fmtCost(t.cost_usd)], ["item time", fmtMs((t.duration_s || 0) * 1000)]]);
  const main = el("main");
  document.body.appendChild(main);
  skippedBox(main, DATA.skipped);

  const colours = { ok: "#16a37b", stopped: "#7a5af8", limit: "#f79009", error: "#d92d20" };
  const stack = el("div", "stack");
  stack.id = "status-chart";
  for (const [status, n] of Object.entries(statuses)) {
    const part = el("div");
    part.dataset.status = status;
    part.title = status + ": " + n;
    part.style.width = (n * 100 / Math.max(items.length, 1)) + "%";
    part.style.background = colours[status] || "#98a2b3";
    stack.appendChild(part);
  }
  main.appendChild(stack);
  main.appendChild(el("div", "meta", Object.entries(statuses).map(([s, n]) => s + " " + n).join(" · ")));

  const chart = el("div", "chart");
  chart.id = "rate-chart";
  chart.title = "ok rate with its 95% interval (0% to 100%)";
  if (t.rate !== null && t.rate !== undefined) {
    const ci = el("div", "ci");
    ci.style.left = (t.ci95[0] * 100) + "%";
    ci.style.width = ((t.ci95[1] - t.ci95[0]) * 100) + "%";
    const dot = el("div", "rate");
    dot.style.left = (t.rate * 100) + "%";
    add(chart, ci, dot);
  }
  add(main, el("h2", null, "ok rate (95% Wilson interval)"), chart);

  const controls = el("div", "controls");
  const pick = el("select");
  pick.id = "status-filter";
  const all = el("option", null, "every status");
  all.value = "";
  pick.appendChild(all);
  for (const s of Object.keys(statuses)) { const o = el("option", null, s); o.value = s; pick.appendChild(o); }
  const search = el("input");
  search.type = "search";
  search.id = "search";
  search.placeholder = "find (id, answer, error)";
  const count = el("span", "meta");
  count.id = "row-count";
  add(controls, pick, search, count);
  main.appendChild(controls);

  const { board, details } = boardAndDetails(main, "260px", "Click an item to see its answer, output and error.");
  const longest = items.reduce((m, i) => Math.max(m, i.duration_s || 0), 0) * 1000;
  const span = { from: 0, to: Math.max(longest, 1) };
  axis(board, span);
  const list = new VirtualList(board, draw);

  function draw(item) {
    const row = el("div", "row");
    row.dataset.kind = "item";
    const lab = el("div", "label", String(item.id) + " · " + item.status);
    const track = el("div", "track");
    const ok = item.status === "ok" || item.status === "stopped";
    track.appendChild(place(el("div", "bar tool" + (ok ? "" : " err")), span, 0, (item.duration_s || 0) * 1000));
    track.appendChild(el("span", "figure", fmtMs((item.duration_s || 0) * 1000) + " · " + fmtInt(item.tokens) + " tok" +
      (item.tools && item.tools.length ? " · " + item.tools.length + " tool call(s)" : "")));
    add(row, lab, track);
    row.addEventListener("click", () => show(item, row));
    return row;
  }

  function show(item, row) {
    for (const other of board.querySelectorAll(".row.sel")) other.classList.remove("sel");
    row.classList.add("sel");
    details.replaceChildren(el("h3", null, "Item " + item.id));
    kv(details, [["status", item.status], ["reason", item.reason], ["input line", item.line],
      ["time", fmtMs((item.duration_s || 0) * 1000)], ["tokens", fmtInt(item.tokens)], ["cost", fmtCost(item.cost_usd)],
      ["steps", item.steps], ["attempts", item.attempts], ["tools", (item.tools || []).join(", ")],
      ["refused", (item.refused || []).join(", ")], ["session", item.session_id]]);
    textBlock(details, "Error", item.error);
    textBlock(details, "Answer", item.answer);
    textBlock(details, "Structured output", item.output);
  }

  function refresh() {
    const status = pick.value;
    const needle = search.value.trim().toLowerCase();
    const shown = items.filter(i => (!status || i.status === status) && (!needle ||
      String(i.id).toLowerCase().includes(needle) || (i.answer || "").toLowerCase().includes(needle) ||
      (i.error || "").toLowerCase().includes(needle)));
    count.textContent = shown.length.toLocaleString("en-US") + " of " + items.length.toLocaleString("en-US") + " items";
    list.set(shown);
  }
  pick.addEventListener("change", refresh);
  let typing = null;
  search.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(refresh, 150); });
  refresh();
})();
