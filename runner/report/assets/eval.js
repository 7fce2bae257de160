"use strict";
// The eval page: each case's pass rate with its 95% Wilson interval; --against: both revisions.
(function () {
  const now = DATA.now;
  const before = DATA.before || null;
  const comparison = before ? before.comparison || { cases: [] } : null;
  const cases = now.cases || [];
  const runs = cases.reduce((n, c) => n + (c.runs || 0), 0);
  const passes = cases.reduce((n, c) => n + (c.passes || 0), 0);
  const failures = cases.reduce((n, c) => n + (c.failures || 0), 0);
  const errors = cases.reduce((n, c) => n + (c.errors || 0), 0);
  const cost = cases.reduce((n, c) => (c.cost_usd === null && c.judge_cost_usd === null) ? n : (n || 0) + (c.cost_usd || 0) + (c.judge_cost_usd || 0), null);
  const regressions = comparison ? comparison.cases.filter(c => c.regression).length : 0;
  const totals = [["cases", fmtInt(cases.length)], ["runs", fmtInt(runs)], ["passed", fmtInt(passes)],
    ["failed", fmtInt(failures), failures > 0], ["errors", fmtInt(errors), errors > 0],
    ["pass rate", fmtRate(passes + failures ? passes / (passes + failures) : null)], ["cost", fmtCost(cost)],
    ["time", fmtMs((now.seconds || 0) * 1000)]];
  if (comparison) totals.push(["regressions", fmtInt(regressions), regressions > 0]);
  header("Eval " + (now.agent || "?") + (before ? " against " + (before.revision || "?") : ""), [
    now.path, "judge " + (now.judge || "none"),
    before ? "before: " + (before.revision || "?") + " · Fisher's exact test, two-sided, alpha " + (comparison.alpha || 0.05) : null,
  ], totals);
  const main = el("main");
  document.body.appendChild(main);

  const oldCase = {};
  if (before) for (const c of before.cases || []) oldCase[c.name] = c;
  const change = {};
  if (comparison) for (const c of comparison.cases || []) change[c.name] = c;

  function chart(c, old) {
    const box = el("div", "chart");
    box.title = "pass rate with its 95% interval (0% to 100%)";
    const lines = old ? [[old, "before"], [c, "now"]] : [[c, "now"]];
    for (const [side, cls] of lines) {
      if (side.pass_rate === null || side.pass_rate === undefined) continue;
      const ci = side.ci95 || [0, 1];
      const bar = el("div", "ci");
      bar.style.left = (ci[0] * 100) + "%";
      bar.style.width = ((ci[1] - ci[0]) * 100) + "%";
      if (old) bar.style.top = cls === "before" ? "3px" : "11px";
      const dot = el("div", "rate " + cls);
      dot.dataset.rate = String(side.pass_rate);
      dot.style.left = (side.pass_rate * 100) + "%";
      if (old) { dot.style.top = cls === "before" ? "-1px" : "7px"; dot.style.width = dot.style.height = "10px"; }
      add(box, bar, dot);
    }
    return box;
  }

  const table = el("table", "cases");
  table.id = "cases";
  const head = el("tr");
  const columns = ["case", "runs", "pass", "fail", "error", "rate", "95% CI", "chart (0-100%)"];
  if (before) columns.splice(5, 0, "before");
  if (before) columns.push("change", "p", "verdict");
  for (const name of columns) head.appendChild(el("th", null, name));
  add(table, el("thead"));
  table.firstChild.appendChild(head);
  const body = el("tbody");
  table.appendChild(body);
  const details = el("section", "details");
  details.id = "details";
  details.style.position = "static";
  details.style.maxWidth = "none";
  add(details, el("div", "meta", "Click a case to see its runs and problems."));

  for (const c of cases) {
    const old = oldCase[c.name];
    const tr = el("tr", "case");
    tr.dataset.case = c.name;
    const ci = c.ci95 || [0, 1];
    const cells = [c.name, c.runs, c.passes, c.failures, c.errors];
    if (before) cells.push(old ? fmtRate(old.pass_rate) : "-");
    cells.push(fmtRate(c.pass_rate), c.passes + c.failures ? fmtRate(ci[0]) + "–" + fmtRate(ci[1]) : "-");
    for (const v of cells) tr.appendChild(el("td", null, v));
    const cell = el("td");
    cell.appendChild(chart(c, old));
    tr.appendChild(cell);
    if (before) {
      const ch = change[c.name];
      tr.appendChild(el("td", null, ch && ch.delta !== null ? (ch.delta > 0 ? "+" : "") + Math.round(ch.delta * 100) + "%" : "-"));
      tr.appendChild(el("td", null, ch && ch.p_value !== null ? Number(ch.p_value).toPrecision(3) : "-"));
      tr.appendChild(el("td", ch ? "status-" + ch.verdict : null, ch ? ch.verdict : "only now"));
    }
    tr.addEventListener("click", () => show(c, old, tr));
    body.appendChild(tr);
  }
  main.appendChild(table);
  if (comparison && comparison.only_before && comparison.only_before.length) {
    main.appendChild(el("div", "meta", "only before (not compared): " + comparison.only_before.join(", ")));
  }
  main.appendChild(details);

  function runList(parent, title, list) {
    add(parent, el("h2", null, title));
    if (!list || !list.length) { parent.appendChild(el("div", "meta", "the runs were not recorded in this report")); return; }
    const t = el("table", "cases");
    const hr = el("tr");
    for (const n of ["#", "status", "time", "tokens", "cost", "session", "problems / judge"]) hr.appendChild(el("th", null, n));
    t.appendChild(hr);
    for (const r of list) {
      const tr = el("tr", "run");
      tr.appendChild(el("td", null, r.index));
      tr.appendChild(el("td", "status-" + r.status, r.status));
      tr.appendChild(el("td", null, fmtMs((r.seconds || 0) * 1000)));
      tr.appendChild(el("td", null, fmtInt(r.tokens)));
      tr.appendChild(el("td", null, fmtCost(r.cost_usd)));
      tr.appendChild(el("td", null, r.session_id || "-"));
      const why = el("td");
      for (const p of r.problems || []) why.appendChild(el("pre", null, p));
      if (r.judge_reason) why.appendChild(el("pre", null, "judge: " + r.judge_reason));
      tr.appendChild(why);
      t.appendChild(tr);
    }
    parent.appendChild(t);
  }

  function show(c, old, tr) {
    for (const other of body.querySelectorAll("tr.sel")) other.classList.remove("sel");
    tr.classList.add("sel");
    details.replaceChildren(el("h3", null, "Case " + c.name));
    kv(details, [["runs", c.runs], ["pass rate", fmtRate(c.pass_rate)], ["tokens", fmtInt(c.tokens)],
      ["judge tokens", fmtInt(c.judge_tokens)], ["cost", fmtCost(c.cost_usd)], ["time", fmtMs((c.seconds || 0) * 1000)]]);
    for (const p of c.problems || []) textBlock(details, "Problem (" + p.runs + " run(s))", p.problem);
    runList(details, before ? "Runs now" : "Runs", (DATA.runs || {})[c.name]);
    if (old) {
      for (const p of old.problems || []) textBlock(details, "Problem before (" + p.runs + " run(s))", p.problem);
      runList(details, "Runs before", (DATA.before_runs || {})[c.name]);
    }
  }
})();
