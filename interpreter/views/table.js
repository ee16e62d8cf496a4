/* table.js: sortable, filterable table with badges and row actions (also a detail's sections). */
V.sortRows = function (rows, col, dir) {
	var sign = dir === "desc" ? -1 : 1;
	return rows.map(function (r, i) { return { r: r, i: i, k: V.key(r[col.key], col.kind) }; }).sort(function (a, b) {
		var x = a.k, y = b.k, xn = x !== x, yn = y !== y;   // NaN (missing) last, whatever the direction
		if (xn || yn) return xn && yn ? a.i - b.i : xn ? 1 : -1;
		return x < y ? -sign : x > y ? sign : a.i - b.i;
	}).map(function (x) { return x.r; });
};
V.table = function (m, opts) {
	var st = opts.state, rows = V.arr(m.rows).filter(V.obj), wrap = V.el("div");
	var cols = V.arr(m.columns).filter(function (c) { return V.obj(c) && typeof c.key === "string"; });
	var acts = V.arr(m.rowActions).filter(function (a) { return V.obj(a) && V.call(a.call); });
	var n = cols.length + (acts.length ? 1 : 0), table = V.el("table"), tbody = V.el("tbody"), counter = V.el("span");
	var head = V.el("tr"), ths = [];
	if (!st.sort && V.obj(m.sort) && typeof m.sort.key === "string") st.sort = { key: m.sort.key, dir: m.sort.dir };
	st.filters = st.filters || Object.create(null);
	cols.forEach(function (c) {
		var th = V.el("th"), label = V.clip(V.txt(c.label, c.key), 60);
		th.scope = "col";
		if (c.sortable === false) th.textContent = label;
		else th.appendChild(V.button(label, function () {
			st.sort = { key: c.key, dir: st.sort && st.sort.key === c.key && st.sort.dir !== "desc" ? "desc" : "asc" };
			draw();
		}));
		ths.push(th);
		head.appendChild(th);
	});
	if (acts.length) head.appendChild(V.add(V.el("th", "acts"), V.el("span", "sr", "Actions")));
	V.add(table, V.add(V.el("caption"), V.el("span", "sr", V.clip(opts.title, 200) + ": "), counter),
		V.add(V.el("thead"), head), tbody);
	if (opts.filters) wrap.appendChild(V.filterBar(m, st, draw));
	wrap.appendChild(V.add(V.el("div", "tw"), table));

	function keep(r) {
		var q = (st.q || "").toLowerCase();
		for (var k in st.filters) if (st.filters[k] && V.str(r[k]) !== st.filters[k]) return false;
		return !q || cols.some(function (c) { return V.fmt(r[c.key], c.kind).toLowerCase().indexOf(q) >= 0; });
	}
	function note(text) { var td = V.el("td", "note", text); td.colSpan = n; return V.add(V.el("tr"), td); }
	function draw() {
		var list = rows.filter(keep), s = st.sort, col = s && cols.filter(function (c) { return c.key === s.key; })[0];
		if (col) list = V.sortRows(list, col, s.dir);
		cols.forEach(function (c, i) {
			ths[i].setAttribute("aria-sort", col !== c ? "none" : s.dir === "desc" ? "descending" : "ascending");
		});
		var total = V.num(m.total), body = V.el("tbody");
		counter.textContent = list.length + (list.length < rows.length ? " of " + rows.length : "") + " shown" +
			(total > rows.length ? " (" + V.fmtNum(total, 0) + " in all)" : "");
		list.slice(0, 1000).forEach(function (r) { body.appendChild(V.row(r, cols, acts)); });
		if (!list.length) body.appendChild(note(rows.length ? "No row matches the filter." : "Nothing to show."));
		if (list.length > 1000) body.appendChild(note(list.length - 1000 + " more rows not drawn; narrow the filter."));
		table.replaceChild(body, tbody);
		tbody = body;
	}
	draw();
	return wrap;
};
V.row = function (r, cols, acts) {
	var tr = V.el("tr"), who = "";
	cols.forEach(function (c) {
		var v = r[c.key];
		if (!who && typeof v === "string") who = V.clip(v, 80);
		tr.appendChild(V.add(V.el("td", /^(number|bytes|percent)$/.test(c.kind) ? "num" : ""), V.cell(v, c)));
	});
	if (acts.length) tr.appendChild(V.rowActs(r, acts, who));
	return tr;
};
/* Up to three row actions as buttons; more behind an "Actions" button that opens them in the cell. */
V.rowActs = function (r, acts, who) {
	var td = V.el("td", "acts"), menu = td, tog = null;
	function show(open) { menu.hidden = !open; tog.setAttribute("aria-expanded", String(open)); }
	if (acts.length > 3) {
		menu = V.el("div", "menu");
		tog = V.button("Actions \u25be", function () { show(menu.hidden); if (!menu.hidden) menu.firstChild.focus(); });
		tog.setAttribute("aria-label", "Actions" + (who ? " for " + who : ""));
		menu.addEventListener("keydown", function (e) { if (e.key === "Escape") { show(false); tog.focus(); } });
		V.add(td, tog, menu);
		show(false);
	}
	acts.forEach(function (a) {
		var b = menu.appendChild(V.actButton(a, who, function () {
			if (tog) { show(false); tog.focus(); }
			V.run(a, r, tog || b, who);
		}));
	});
	return td;
};
V.filterBar = function (m, st, redraw) {
	var bar = V.el("div", "bar"), q = V.input("search", "Search rows", st.q);
	q.addEventListener("input", function () { st.q = q.value; redraw(); });
	bar.appendChild(q);
	V.arr(m.filters).forEach(function (f) {
		if (!V.obj(f) || typeof f.key !== "string") return;
		var sel = V.el("select");
		// options by position: no value in an attribute
		var vals = V.arr(f.values).slice(0, 200).map(V.str);
		sel.appendChild(V.el("option", "", "All"));
		vals.forEach(function (v) { sel.appendChild(V.el("option", "", V.clip(v, 60))); });
		sel.selectedIndex = vals.indexOf(st.filters[f.key]) + 1;
		st.filters[f.key] = vals[sel.selectedIndex - 1] || "";   // a value gone after a refresh no longer filters
		sel.addEventListener("change", function () { st.filters[f.key] = vals[sel.selectedIndex - 1] || ""; redraw(); });
		bar.appendChild(V.add(V.el("label", "", V.clip(V.txt(f.label, f.key), 60)), sel));
	});
	return bar;
};
V.tableView = function (vm, st) { return V.table(vm, { state: st, filters: true, title: V.txt(vm.title, "Table") }); };
