/* table.js: a sortable, filterable table with badges and row actions; also the sections of a detail. */
V.columns = function (m) {
  return V.arr(m.columns).filter(function (c) { return V.obj(c) && typeof c.key === "string"; });
};
V.sortRows = function (rows, col, dir) {
  var kind = col.kind, sign = dir === "desc" ? -1 : 1;
  return rows.map(function (r, i) { return { r: r, i: i, k: V.key(r[col.key], kind) }; }).sort(function (a, b) {
    var ax = a.k, bx = b.k, an = typeof ax === "number" && isNaN(ax), bn = typeof bx === "number" && isNaN(bx);
    if (an || bn) return an && bn ? a.i - b.i : an ? 1 : -1;   // missing values last, whatever the direction
    return ax < bx ? -sign : ax > bx ? sign : a.i - b.i;
  }).map(function (x) { return x.r; });
};
V.rowLabel = function (row, cols) {
  for (var i = 0; i < cols.length; i++) {
    var v = row[cols[i].key];
    if (typeof v === "string" && v) return V.clip(v, 80);
  }
  return "";
};
/* The table of model m. opts: {state, title, filters (bool), max}. */
V.table = function (m, opts) {
  var st = opts.state, cols = V.columns(m), acts = V.arr(m.rowActions).filter(function (a) {
    return V.obj(a) && V.call(a.call);
  });
  var rows = V.arr(m.rows).filter(V.obj), wrap = V.el("div", "tblock");
  if (!st.sort && V.obj(m.sort) && typeof m.sort.key === "string") st.sort = { key: m.sort.key, dir: m.sort.dir === "desc" ? "desc" : "asc" };
  st.filters = st.filters || Object.create(null);
  var tbody = V.el("tbody"), table = V.el("table"), caption = V.el("caption"), counter = V.el("span");
  var head = V.el("tr"), ths = [];
  V.add(caption, V.el("span", "sr", opts.title), counter);
  cols.forEach(function (c) {
    var th = V.el("th");
    th.scope = "col";
    if (c.sortable !== false) {
      th.appendChild(V.button(V.txt(c.label, c.key), function () {
        var same = st.sort && st.sort.key === c.key;
        st.sort = { key: c.key, dir: same && st.sort.dir === "asc" ? "desc" : "asc" };
        draw();
      }));
    } else th.textContent = V.txt(c.label, c.key);
    ths.push(th);
    head.appendChild(th);
  });
  if (acts.length) { var ath = V.el("th", "", ""); ath.appendChild(V.el("span", "sr", "Actions")); head.appendChild(ath); }
  V.add(table, caption, V.add(V.el("thead"), head), tbody);
  if (opts.filters) wrap.appendChild(V.filterBar(m, cols, st, function () { draw(); }));
  V.add(wrap, V.add(V.el("div", "tw"), table));

  function matches(r) {
    var q = (st.q || "").toLowerCase();
    for (var k in st.filters) if (st.filters[k] && V.str(r[k]) !== st.filters[k]) return false;
    if (!q) return true;
    return cols.some(function (c) { return V.fmt(r[c.key], c.kind).toLowerCase().indexOf(q) >= 0; });
  }
  function draw() {
    var list = rows.filter(matches), col = st.sort && cols.filter(function (c) { return c.key === st.sort.key; })[0];
    if (col) list = V.sortRows(list, col, st.sort.dir);
    cols.forEach(function (c, i) {
      ths[i].setAttribute("aria-sort", col === c ? (st.sort.dir === "desc" ? "descending" : "ascending") : "none");
    });
    var total = V.num(m.total), max = opts.max || 1000;
    counter.textContent = list.length + (list.length !== rows.length ? " of " + rows.length + " shown" : " shown") +
      (isFinite(total) && total > rows.length ? " (" + V.fmtNum(total, 0) + " in all)" : "");
    var body = V.el("tbody");
    list.slice(0, max).forEach(function (r) { body.appendChild(V.row(r, cols, acts, m)); });
    if (!list.length) {
      var td = V.el("td", "note", rows.length ? "No row matches the filter." : "Nothing to show.");
      td.colSpan = cols.length + (acts.length ? 1 : 0);
      body.appendChild(V.add(V.el("tr"), td));
    }
    if (list.length > max) {
      var more = V.el("td", "note", (list.length - max) + " more rows not drawn; narrow the filter.");
      more.colSpan = cols.length + (acts.length ? 1 : 0);
      body.appendChild(V.add(V.el("tr"), more));
    }
    table.replaceChild(body, tbody);
    tbody = body;
    V.bridge.sizeSoon();
  }
  draw();
  return wrap;
};
V.row = function (r, cols, acts, m) {
  var tr = V.el("tr");
  cols.forEach(function (c) {
    var k = c.kind;
    tr.appendChild(V.add(V.el("td", k === "number" || k === "bytes" || k === "percent" ? "num" : ""), V.cell(r[c.key], c)));
  });
  if (acts.length) tr.appendChild(V.rowActs(r, acts, V.rowLabel(r, cols)));
  return tr;
};
/* Up to three row actions as buttons; more behind one "Actions" button that opens them in the cell. */
V.rowActs = function (r, acts, who) {
  var td = V.el("td", "acts"), menu = td, toggle = null;
  if (acts.length > 3) {
    menu = V.el("div", "menu");
    menu.hidden = true;
    toggle = V.button("Actions \u25be", function () {
      menu.hidden = !menu.hidden;
      toggle.setAttribute("aria-expanded", String(!menu.hidden));
      if (!menu.hidden) menu.firstChild.focus();
    });
    toggle.setAttribute("aria-expanded", "false");
    toggle.setAttribute("aria-label", "Actions" + (who ? " for " + who : ""));
    menu.addEventListener("keydown", function (e) {
      if (e.key === "Escape") { menu.hidden = true; toggle.setAttribute("aria-expanded", "false"); toggle.focus(); }
    });
    V.add(td, toggle, menu);
  }
  acts.forEach(function (a) {
    var b = V.button(V.txt(a.label, V.txt(a.id, "Run")), function () {
      if (toggle) { menu.hidden = true; toggle.setAttribute("aria-expanded", "false"); }
      V.run(a, r, toggle || b, who);
    }, a.destructive ? "danger" : "");
    b.setAttribute("aria-label", V.txt(a.label, "Run") + (who ? " " + who : "") + (a.destructive ? " (destructive)" : ""));
    menu.appendChild(b);
  });
  return td;
};
V.filterBar = function (m, cols, st, redraw) {
  var bar = V.el("div", "bar"), q = V.el("input");
  q.type = "search";
  q.value = st.q || "";
  q.placeholder = "Search rows";
  q.setAttribute("aria-label", "Search rows");
  q.addEventListener("input", function () { st.q = q.value; redraw(); });
  bar.appendChild(q);
  V.arr(m.filters).forEach(function (f) {
    if (!V.obj(f) || typeof f.key !== "string") return;
    var sel = V.el("select"), lab = V.el("label", "", V.txt(f.label, f.key));
    sel.appendChild(V.el("option", "", "All")).value = "";
    V.arr(f.values).slice(0, 200).forEach(function (v) {
      var o = V.el("option", "", V.clip(V.str(v), 60));
      o.value = V.str(v);
      sel.appendChild(o);
    });
    sel.value = st.filters[f.key] || "";
    sel.addEventListener("change", function () { st.filters[f.key] = sel.value; redraw(); });
    bar.appendChild(V.add(lab, sel));
  });
  return bar;
};
V.tableView = function (vm, st) {
  var env = V.obj(vm.environment);
  return V.table(vm, { state: st, filters: true,
    title: V.txt(vm.title, "Table") + (env ? " (" + V.txt(env.name, V.txt(env.id)) + ")" : "") });
};
