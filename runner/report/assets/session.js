"use strict";
// The session timeline: turns, model calls and tool calls on one time axis; a workflow as lanes.
(function () {
  const h = DATA.header || {};
  const t = DATA.totals || {};
  const rows = DATA.rows || [];
  const workflow = DATA.kind === "workflow";
  const title = workflow ? "Workflow " + (h.workflow || h.agent || "?") : "Session " + (h.session_id || "?");
  const totals = workflow
    ? [["status", h.status || "-", h.status !== "done"], ["steps", fmtInt(t.steps)], ["errors", fmtInt(t.errors), t.errors > 0],
       ["tokens", fmtInt(t.tokens)], ["cost", fmtCost(t.cost_usd)], ["duration", fmtMs(t.duration_ms)]]
    : [["status", h.status || "-", h.status !== "done"], ["turns", fmtInt(t.turns)], ["steps", fmtInt(t.steps)],
       ["tool calls", fmtInt(t.tools)], ["errors", fmtInt(t.errors), t.errors > 0], ["tokens in", fmtInt(t.tokens_in)]]
      .concat(t.cached_in ? [["cached tokens in", fmtInt(t.cached_in)]] : [])  // only when a call recorded some
      .concat([["tokens out", fmtInt(t.tokens_out)], ["cost", fmtCost(t.cost_usd)], ["duration", fmtMs(t.duration_ms)]]);
  header(title, [
    workflow ? "session " + (h.session_id || "?") : "agent " + (h.agent || "?") + "  " + (h.agent_path || ""),
    "model " + (h.model || "?") + " · started " + (h.started_at || "?") + " · runner " + (h.runner_version || "?"),
  ], totals);

  const main = el("main");
  document.body.appendChild(main);
  skippedBox(main, DATA.skipped);
  for (const row of rows) {
    if (row.k === "answer" || row.k === "output") {
      const box = el("section", "final");
      box.id = row.k === "answer" ? "final-answer" : "structured-output";
      textBlock(box, row.k === "answer" ? "Final answer" : "Structured output", row.text);
      main.appendChild(box);
    }
  }

  const lanes = DATA.lanes || [];
  const ordered = workflow
    ? rows.filter(r => r.k === "step").sort((a, b) => (lanes.indexOf(a.lane) - lanes.indexOf(b.lane)) || (a.s - b.s))
        .concat(rows.filter(r => r.k !== "step"))
    : rows;
  const turns = Array.from(new Set(rows.filter(r => r.turn).map(r => r.turn)));

  const controls = el("div", "controls");
  const turnPick = el("select");
  turnPick.id = "turn-filter";
  add(turnPick, el("option", null, "all turns"));
  turnPick.firstChild.value = "";
  for (const n of turns) { const o = el("option", null, "turn " + n); o.value = String(n); turnPick.appendChild(o); }
  const problems = el("input");
  problems.type = "checkbox";
  problems.id = "problems-only";
  const search = el("input");
  search.type = "search";
  search.id = "search";
  search.placeholder = "find (tool, text)";
  const count = el("span", "meta");
  count.id = "row-count";
  const problemLabel = el("label", null, " problems only");
  problemLabel.prepend(problems);
  if (!workflow && turns.length) add(controls, turnPick);
  add(controls, problemLabel, search, count);
  main.appendChild(controls);

  const { board, details } = boardAndDetails(main, "220px", "Click a row to see its arguments, results and figures.");

  let span = { from: 0, to: Math.max(t.duration_ms || 0, 1) };
  let axisNode = axis(board, span);
  let selected = null;
  const list = new VirtualList(board, drawRow);

  function start(r) { return r.s !== undefined ? r.s : r.t; }
  function end(r) { return r.e !== undefined && r.e !== null ? r.e : start(r); }

  function label(r) {
    switch (r.k) {
      case "turn": return "turn " + r.n + (r.continued ? " (continued)" : "");
      case "model": return "step " + r.step + " · model" + (r.calls ? " → " + r.calls + " call(s)" : "");
      case "tool": return r.name + (r.of > 1 ? "  ∥ " + (r.par + 1) + "/" + r.of : "");
      case "step": return r.lane + (r.key !== r.lane ? " · " + r.key : "") + (r.agent ? " (" + r.agent + ")" : "");
      case "note": return r.name + (r.text ? ": " + r.text : "");
      case "config": return "configuration changed";
      case "answer": return "final answer";
      case "output": return "structured output";
      default: return r.k;
    }
  }

  function figure(r) {
    if (r.k === "model") {
      return fmtMs(r.e - r.s) + (r.ft !== undefined ? " · first " + fmtMs(r.ft) : "") + " · " + r.in + "→" + r.out + " tok" +
        (r.cached ? " (" + fmtInt(r.cached) + " cached)" : "") + (r.cost !== undefined ? " · " + fmtCost(r.cost) : "");
    }
    if (r.k === "tool" || r.k === "step") return fmtMs(end(r) - start(r)) + (r.status ? " · " + r.status : "");
    if (r.k === "turn" && r.config) return "config " + r.config;
    return "";
  }

  function drawRow(r) {
    const row = el("div", "row");
    row.dataset.kind = r.k;
    if (r === selected) row.classList.add("sel");
    const lab = el("div", "label" + (r.k === "tool" ? " indent" : ""), label(r));
    lab.title = label(r);
    const track = el("div", "track");
    if (r.k === "model" || r.k === "tool" || r.k === "step") {
      const bad = r.err || r.error || r.denied || (r.status && r.status !== "ok");
      const cls = "bar " + r.k + (bad ? " err" : "") + (r.open ? " open" : "");
      track.appendChild(place(el("div", cls), span, start(r), end(r)));
      if (r.k === "model" && r.ft !== undefined) track.appendChild(place(el("div", "bar ft"), span, r.s, r.s + r.ft));
    } else {
      track.appendChild(place(el("div", "mark " + r.k + (r.bad ? " bad" : "")), span, start(r)));
    }
    track.appendChild(el("span", "figure", figure(r)));
    add(row, lab, track);
    row.addEventListener("click", () => show(r, row));
    return row;
  }

  function show(r, node) {
    selected = r;
    for (const other of board.querySelectorAll(".row.sel")) other.classList.remove("sel");
    if (node) node.classList.add("sel");
    details.replaceChildren();
    add(details, el("h3", null, label(r)));
    const when = [["starts", fmtMs(start(r))], ["ends", r.e !== undefined ? fmtMs(end(r)) : null]];
    if (r.k === "model") {
      kv(details, when.concat([["latency", fmtMs(r.e - r.s) + (r.untimed ? " (not recorded)" : "")],
        ["first token", r.ft !== undefined ? fmtMs(r.ft) : "not recorded"], ["tokens in", fmtInt(r.in)],
        ["cached tokens in", r.cached ? fmtInt(r.cached) : null], ["tokens out", fmtInt(r.out)],
        ["cost", fmtCost(r.cost)], ["response id", r.rid || null], ["turn", r.turn], ["tool calls", r.calls]]));
      textBlock(details, "Reply", r.text);
      textBlock(details, "Reasoning", r.reasoning);
    } else if (r.k === "tool") {
      kv(details, when.concat([["duration", fmtMs(end(r) - start(r))], ["call id", r.id], ["step", r.step],
        ["parallel", r.of > 1 ? (r.par + 1) + " of " + r.of : null], ["error", r.err ? "yes" : null],
        ["decision", r.denied || null],
        ["result", r.open ? "none: the transcript ends first" : null]]));
      textBlock(details, "Arguments", r.args);
      textBlock(details, "Result", r.result);
    } else if (r.k === "step") {
      kv(details, when.concat([["duration", fmtMs(end(r) - start(r))], ["status", r.status || (r.open ? "not ended" : "-")],
        ["kind", r.kind], ["agent", r.agent], ["tokens", fmtInt(r.tokens)], ["cost", fmtCost(r.cost)],
        ["session", r.session]]));
      textBlock(details, "Error", r.error);
      textBlock(details, "Output", r.output);
    } else {
      kv(details, when.concat([["turn", r.turn], ["configuration", r.config]]));
      textBlock(details, r.k === "config" ? "What changed (" + r.old + " → " + r.new + ")" : "Text", r.diff || r.text || r.input);
      if (r.k === "turn") textBlock(details, "Input", r.input);
      textBlock(details, "Recorded", r.data);
    }
  }

  function refresh() {
    const turn = turnPick.value ? Number(turnPick.value) : null;
    const needle = search.value.trim().toLowerCase();
    const bad = problems.checked;
    const shown = ordered.filter(r => {
      if (turn !== null && r.turn !== turn && r.n !== turn) return false;
      if (bad && !(r.err || r.bad || r.error || r.open || r.denied || (r.status && r.status !== "ok"))) return false;
      if (needle && !(label(r).toLowerCase().includes(needle) || (r.text || "").toLowerCase().includes(needle) ||
        (r.args || "").toLowerCase().includes(needle) || (r.result || "").toLowerCase().includes(needle))) return false;
      return true;
    });
    if (turn !== null && shown.length) {
      let from = Infinity, to = -Infinity;
      for (const r of shown) { from = Math.min(from, start(r)); to = Math.max(to, end(r)); }
      span = { from: from, to: Math.max(to, from + 1) };
    } else {
      span = { from: 0, to: Math.max(t.duration_ms || 0, 1) };
    }
    const fresh = axis(board, span);
    board.replaceChild(fresh, axisNode);
    axisNode = fresh;
    count.textContent = shown.length.toLocaleString("en-US") + " of " + ordered.length.toLocaleString("en-US") + " rows";
    list.set(shown);
    if (!shown.length) list.spacer.appendChild(el("div", "empty", "nothing to show"));
  }
  turnPick.addEventListener("change", refresh);
  problems.addEventListener("change", refresh);
  let typing = null;
  search.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(refresh, 150); });
  refresh();
})();
