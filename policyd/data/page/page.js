// policyd's report page: renders the JSON document embedded in #policyd-data (explain,
// simulate or diff) with DOM calls only (no innerHTML of data: names and messages come
// from the cluster). Big tables are virtualised: only the rows in view are in the DOM.
"use strict";

const ROW = 22; // px, one table row (page.css: .grid td height)

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

// A virtualised, sortable, filterable table. columns: {title, value(row) -> sortable,
// text(row) -> string, cls(row) -> class, tip(row)}; filter(row) -> bool set by the page.
class VTable {
  constructor(parent, columns, rows, opts) {
    this.columns = columns;
    this.all = rows;
    this.rows = rows.slice();
    this.filters = {};
    this.rowClass = (opts && opts.rowClass) || (() => "");
    this.onChange = (opts && opts.onChange) || (() => {});
    this.sortCol = -1;
    this.asc = true;
    this.box = el("div", { class: "grid", "data-testid": (opts && opts.id) || "grid" });
    this.table = el("table");
    const head = el("tr");
    columns.forEach((c, i) => {
      head.append(el("th", { text: c.title, title: c.help || "Sort by " + c.title,
                             "data-col": String(i), onclick: () => this.sortBy(i) }));
    });
    this.thead = el("thead", {}, head);
    this.tbody = el("tbody");
    this.table.append(this.thead, this.tbody);
    this.box.append(this.table);
    this.box.addEventListener("scroll", () => this.draw());
    parent.append(this.box);
    if (opts && opts.sort != null) this.sortBy(opts.sort, opts.asc !== false);
    this.apply();
  }
  setFilter(name, fn) {
    if (fn) this.filters[name] = fn; else delete this.filters[name];
    this.apply();
  }
  apply() {
    const fs = Object.values(this.filters);
    this.rows = this.all.filter((r) => fs.every((f) => f(r)));
    this.order();
    this.box.scrollTop = 0;
    this.draw();
    this.onChange(this.rows.length, this.all.length);
  }
  sortBy(i, asc) {
    this.asc = asc !== undefined ? asc : (this.sortCol === i ? !this.asc : true);
    this.sortCol = i;
    this.thead.querySelectorAll("th").forEach((th, j) => {
      th.classList.toggle("sorted", j === i);
      th.classList.toggle("asc", j === i && this.asc);
    });
    this.order();
    this.draw();
  }
  order() {
    if (this.sortCol < 0) return;
    const v = this.columns[this.sortCol].value;
    const sign = this.asc ? 1 : -1;
    this.rows.sort((a, b) => {
      const x = v(a), y = v(b);
      if (x === y) return 0;
      if (x == null) return 1;
      if (y == null) return -1;
      return (x < y ? -1 : 1) * sign;
    });
  }
  draw() {
    const view = this.box.clientHeight || 600;
    const first = Math.max(0, Math.floor(this.box.scrollTop / ROW) - 10);
    const last = Math.min(this.rows.length, first + Math.ceil(view / ROW) + 20);
    const body = el("tbody");
    body.append(this.spacer(first * ROW));
    for (let i = first; i < last; i++) {
      const r = this.rows[i];
      const tr = el("tr", { class: this.rowClass(r) });
      for (const c of this.columns) {
        const link = c.link ? c.link(r) : null;  // policyd ui: a link to another page
        const td = el("td", { class: c.cls ? c.cls(r) : "", text: link ? "" : c.text(r) },
                      link ? el("a", { href: link, text: c.text(r) }) : null);
        const shade = c.shade ? c.shade(r) : null;  // 0..1: a score's share of its best
        if (shade != null) td.style.background = `rgba(36, 87, 166, ${(0.08 + 0.42 * shade).toFixed(3)})`;
        const tip = c.tip ? c.tip(r) : "";
        if (tip) td.title = tip;
        tr.append(td);
      }
      body.append(tr);
    }
    body.append(this.spacer((this.rows.length - last) * ROW));
    this.table.replaceChild(body, this.tbody);
    this.tbody = body;
  }
  spacer(height) {
    const td = el("td", { colspan: String(this.columns.length) });
    td.style.height = height + "px";
    return el("tr", { class: "spacer" }, td);
  }
}

function counter(node) {
  return (shown, total) => { node.textContent = shown === total
    ? `${total} rows` : `${shown} of ${total} rows`; };
}

function chips(parent, groups, onPick) {
  // groups: [[label, count, key]]; a click picks one (again: none).
  let active = null;
  const buttons = groups.map(([label, n, key]) => {
    const b = el("button", { class: "chip", "data-group": key, title: label,
                             onclick: () => {
      active = active === key ? null : key;
      buttons.forEach((x) => x.classList.toggle("active", x.dataset.group === active));
      onPick(active);
    } }, el("span", { class: "label", text: label }), el("span", { class: "n", text: String(n) }));
    return b;
  });
  parent.append(...buttons);
}

function textFilter(table, placeholder, fields) {
  const input = el("input", { type: "search", placeholder, "data-testid": "search" });
  input.addEventListener("input", () => {
    const q = input.value.trim().toLowerCase();
    table.setFilter("text", q ? (r) => fields(r).some((f) => String(f).toLowerCase().includes(q)) : null);
  });
  return input;
}

function notes(parent, doc) {
  const items = [...(doc.notes || []), ...(doc.warnings || []).map((w) => "warning: " + w)];
  if (!items.length) return;
  parent.append(el("section", {}, el("h2", { text: "Notes" }),
    el("ul", { class: "notes" }, ...items.map((n) => el("li", { text: n })))));
}

// ---- policyd ui: navigation and the what-if editor -----------------------------------

function uiBar(ui, root) {
  const pods = el("datalist", { id: "pods" }, ...(ui.pods || []).map((p) => el("option", { value: p })));
  root.append(el("nav", { class: "ui", "data-testid": "ui-nav" },
    el("a", { href: "/", text: "simulate" }),
    el("form", { method: "get", action: "/explain" },
      el("input", { name: "pod", list: "pods", placeholder: "NAMESPACE/NAME", value: ui.pod || "",
                    "data-testid": "pod" }),
      el("button", { type: "submit", text: "explain" }), pods),
    el("span", { class: "where", text: ui.where ? `cluster: ${ui.where}` : "" })));
  if (ui.error) root.append(el("div", { class: "error", role: "alert", "data-testid": "ui-error", text: ui.error }));
  const text = el("textarea", { name: "policies", rows: "20", spellcheck: "false", "data-testid": "policies" });
  text.value = ui.policies || "";
  const editor = el("details", { class: "whatif", "data-testid": "what-if" },
    el("summary", { text: ui.whatIf ? "What if: the page below uses these edited policies (nothing is written to the cluster)"
                                    : "What if: edit the policies and see this page with them" }),
    el("form", { method: "post", action: ui.action || "/" }, text,
      el("div", { class: "bar" }, el("button", { type: "submit", "data-testid": "apply", text: "Apply" }),
        el("a", { href: ui.action || "/", text: "back to the policies in force" }))));
  editor.open = Boolean(ui.whatIf || ui.error);
  root.append(editor);
}

// ---- explain -------------------------------------------------------------------------

function whyRejected(n) {
  // The group a node falls in: the plugin that rejected it first, with the verdict it
  // gave (as the FailedScheduling message counts them).
  if (n.feasible) return "feasible";
  const plugin = n.rejectedBy || "?";
  return `${plugin}: ${(n.filters || {})[plugin] || "rejected"}`;
}

function explain(doc, root) {
  const nodes = doc.nodes || [];
  const seen = [], scores = [];
  for (const n of nodes) {
    for (const p of Object.keys(n.filters || {})) if (!seen.includes(p)) seen.push(p);
    for (const p of Object.keys(n.scores || {})) if (!scores.includes(p)) scores.push(p);
  }
  // Filters with nothing to check for this pod on any node: named once, not a column.
  const idle = seen.filter((p) => nodes.every((n) => (n.filters || {})[p] === "skipped"));
  const filters = seen.filter((p) => !idle.includes(p));
  const bestTotal = Math.max(0, ...nodes.map((n) => n.total || 0));
  const feasible = Array.isArray(doc.feasibleNodes) ? doc.feasibleNodes.length
    : nodes.filter((n) => n.feasible).length;
  const head = el("header", {},
    el("h1", { text: `policyd explain: ${doc.pod}` }),
    el("div", { class: "sub", "data-testid": "counts",
                text: `profile ${doc.profile || ""}; ${nodes.length} nodes, ${feasible} feasible` }),
    el("div", { class: "verdict " + (doc.node ? "good" : "bad"), "data-testid": "verdict",
                text: doc.node ? `chosen node: ${doc.node}` : (doc.message || doc.error || "no node") }));
  root.append(head);
  const main = el("main");
  root.append(main);
  const groups = new Map();
  for (const n of nodes) {
    const g = whyRejected(n);
    groups.set(g, (groups.get(g) || 0) + 1);
  }
  const groupBar = el("div", { class: "bar", "data-testid": "groups" },
                      el("strong", { text: "Nodes by verdict:" }));
  main.append(groupBar);
  const count = el("span", { class: "count", "data-testid": "count" });
  const bar = el("div", { class: "bar" });
  main.append(bar);
  const legend = el("div", { class: "bar legend" }, el("span", { class: "", text: "Filters:" }),
    el("span", { style: "background:var(--pass)", text: "passed" }),
    el("span", { style: "background:var(--fail)", text: "rejected" }),
    el("span", { style: "background:var(--skip)", text: "skipped / not run" }),
    el("span", { text: "Scores: normalized x weight, darker is higher; TOTAL is the sum; \u2605 the chosen node" }));
  main.append(legend);
  if (idle.length) main.append(el("div", { class: "bar count", text: `Filters with nothing to check for this pod: ${idle.join(", ")}` }));
  const columns = [
    { title: "node", value: (n) => n.name, text: (n) => n.name },
    { title: "verdict", value: (n) => whyRejected(n), text: (n) => n.feasible ? "feasible" : "rejected",
      cls: (n) => n.feasible ? "pass" : "fail", tip: (n) => whyRejected(n) },
    ...filters.map((p) => ({
      title: p, help: `Filter ${p}`, value: (n) => (n.filters || {})[p] || "",
      text: (n) => { const v = (n.filters || {})[p]; return v === "passed" ? "\u2713" : (v || "\u2013"); },
      cls: (n) => { const v = (n.filters || {})[p]; return v === "passed" ? "pass" : (v && v !== "skipped" && v !== "not run" ? "fail" : "skip"); },
      tip: (n) => { const r = (n.reasons || {})[p]; return r ? (Array.isArray(r) ? r.join("; ") : String(r)) : ((n.filters || {})[p] || ""); },
    })),
    ...scores.map((p) => ({
      title: `${p} score`, help: `Score ${p}: normalized x weight`, value: (n) => ((n.scores || {})[p] || {}).weighted ?? null,
      text: (n) => { const s = (n.scores || {})[p]; return s ? String(s.weighted) : ""; },
      cls: () => "num", shade: (n) => { const s = (n.scores || {})[p]; return s ? s.normalized / 100 : null; },
      tip: (n) => { const s = (n.scores || {})[p]; return s ? `raw ${s.raw}, normalized ${s.normalized}, weight ${s.weight}` : ""; },
    })),
    { title: "TOTAL", value: (n) => n.total ?? null, text: (n) => n.total == null ? "" : String(n.total), cls: () => "num",
      shade: (n) => n.total == null || !bestTotal ? null : n.total / bestTotal },
  ];
  const chosenFirst = nodes.slice().sort((a, b) => (b.chosen ? 1 : 0) - (a.chosen ? 1 : 0));
  const table = new VTable(main, columns, chosenFirst, {
    rowClass: (n) => n.chosen ? "chosen" : "", onChange: counter(count), id: "grid" });
  chips(groupBar, [...groups.entries()].sort((a, b) => b[1] - a[1]).map(([g, n]) => [g, n, g]),
        (key) => table.setFilter("group", key ? (n) => whyRejected(n) === key : null));
  const verdict = el("select", { "data-testid": "verdict-filter" },
    el("option", { value: "", text: "all nodes" }), el("option", { value: "feasible", text: "feasible" }),
    el("option", { value: "rejected", text: "rejected" }));
  verdict.addEventListener("change", () => table.setFilter("verdict", verdict.value
    ? (n) => (verdict.value === "feasible") === Boolean(n.feasible) : null));
  bar.append(textFilter(table, "filter nodes by name or reason", (n) => [n.name, whyRejected(n)]), verdict, count);
  if ((doc.audit || []).length) {
    main.append(el("section", {}, el("h2", { text: "Audited (not enforced)" }),
      el("ul", {}, ...doc.audit.map((a) => el("li", { text: `policy ${a.policy}, rule ${a.rule}: would reject ${a.rejected} of ${a.considered} feasible nodes: ${a.reason}` })))));
  }
  notes(main, doc);
}

// ---- simulate ------------------------------------------------------------------------

function simulate(doc, root, ui) {
  const placements = doc.placements || [];
  const plugins = [];
  for (const p of placements) for (const k of Object.keys(p.blockedBy || {})) if (!plugins.includes(k)) plugins.push(k);
  root.append(el("header", {}, el("h1", { text: "policyd simulate" }),
    el("div", { class: "sub", "data-testid": "verdict",
                text: `${doc.scheduled} scheduled, ${doc.unschedulable} unschedulable, ${doc.errors} errors` })));
  const main = el("main");
  root.append(main);
  const count = el("span", { class: "count", "data-testid": "count" });
  const groupBar = el("div", { class: "bar", "data-testid": "groups" }, el("strong", { text: "Blocking plugins:" }));
  main.append(groupBar);
  const bar = el("div", { class: "bar" });
  main.append(bar);
  const columns = [
    { title: "pod", value: (p) => p.pod, text: (p) => p.pod,
      link: ui ? (p) => "/explain?pod=" + encodeURIComponent(p.pod) : null },
    { title: "node", value: (p) => p.node || "", text: (p) => p.node || "\u2013",
      cls: (p) => p.node ? "pass" : "fail", tip: (p) => p.message || "" },
    ...plugins.map((k) => ({ title: k, help: `Nodes ${k} rejected for the pod`,
      value: (p) => (p.blockedBy || {})[k] ?? null, text: (p) => (p.blockedBy || {})[k] == null ? "" : String(p.blockedBy[k]),
      cls: (p) => (p.blockedBy || {})[k] ? "fail num" : "num" })),
    { title: "why not", value: (p) => p.message || "", text: (p) => p.message || "", tip: (p) => p.message || "" },
  ];
  const table = new VTable(main, columns, placements, { onChange: counter(count), id: "grid" });
  const blocked = plugins.map((k) => [k, placements.filter((p) => (p.blockedBy || {})[k]).length, k]);
  chips(groupBar, [["placed", placements.filter((p) => p.node).length, "__placed"], ...blocked],
        (key) => table.setFilter("group", key === null ? null : key === "__placed"
          ? (p) => Boolean(p.node) : (p) => Boolean((p.blockedBy || {})[key])));
  bar.append(textFilter(table, "filter pods by name, node or reason", (p) => [p.pod, p.node || "", p.message || ""]), count);
  if ((doc.podGroups || []).length) {
    main.append(el("section", {}, el("h2", { text: "Pod groups" }),
      el("ul", {}, ...doc.podGroups.map((g) => el("li", { text: `${g.podGroup}: ${g.placed ? "placed" : "held"}, ${g.fits.length} of ${g.tried} fit` })))));
  }
  notes(main, doc);
}

// ---- diff ----------------------------------------------------------------------------

function diff(doc, root) {
  const s = doc.summary || {};
  root.append(el("header", {}, el("h1", { text: `policyd diff: ${doc.old} \u2192 ${doc.new}` }),
    el("div", { class: "verdict " + (s.newViolations ? "bad" : "good"), "data-testid": "verdict",
                text: s.newViolations ? `${s.newViolations} bound pod(s) would become violations`
                                       : "No bound pod becomes a violation." })));
  const main = el("main");
  root.append(main);
  const rows = Object.entries(s).map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: String(v) })));
  main.append(el("section", {}, el("h2", { text: "Summary" }), el("table", { class: "summary", "data-testid": "summary" }, ...rows)));
  const lists = [
    ["New violations (bound pods)", doc.newViolations || [], ["pod", "node", "policy", "rule", "mode", "message"]],
    ["Violations fixed", doc.fixedViolations || [], ["pod", "node", "policy", "rule", "mode", "message"]],
    ["Pending pods whose placement changes", (doc.placements || []).map((c) => ({ pod: c.pod, change: c.change,
      old: c.old.node || c.old.status, new: c.new.node || c.new.status, shift: c.shift, why: c.new.node ? "" : c.new.message })),
      ["pod", "change", "old", "new", "shift", "why"]],
    ["Pod groups", (doc.podGroups || []).map((g) => ({ group: g.group, change: g.change, pending: g.pending,
      old: g.old.placed ? "placed" : "held", new: g.new.placed ? "placed" : "held" })), ["group", "change", "pending", "old", "new"]],
  ];
  for (const [title, items, keys] of lists) {
    if (!items.length) continue;
    const section = el("section", {}, el("h2", { text: `${title} (${items.length})` }));
    main.append(section);
    const count = el("span", { class: "count" });
    const bar = el("div", { class: "bar" });
    section.append(bar);
    const columns = keys.map((k) => ({ title: k, value: (r) => r[k] ?? null, text: (r) => r[k] == null ? "" : String(r[k]), tip: (r) => r[k] == null ? "" : String(r[k]) }));
    const table = new VTable(section, columns, items, { onChange: counter(count), id: title });
    table.box.style.height = Math.min(40, 2 + items.length) * ROW + "px";
    bar.append(textFilter(table, "filter", (r) => keys.map((k) => r[k] ?? "")), count);
  }
  notes(main, doc);
}

function main() {
  // Repeated long texts are written once (html_page.py): {"$s": i} is strings[i].
  const strings = JSON.parse(document.getElementById("policyd-strings").textContent);
  const data = JSON.parse(document.getElementById("policyd-data").textContent,
    (_, v) => v !== null && typeof v === "object" && !Array.isArray(v)
      && typeof v.$s === "number" && Object.keys(v).length === 1 ? strings[v.$s] : v);
  const root = document.getElementById("app");
  if (data.ui) uiBar(data.ui, root);
  ({ explain, simulate, diff })[data.kind](data.document, root, data.ui);
  document.body.dataset.ready = "true";
}

main();
