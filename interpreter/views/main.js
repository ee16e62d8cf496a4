/* main.js: the router. Draws the widget the result's view model names, else the result's text. */
V.widgets = { table: V.tableView, logs: V.logsView, chart: V.chartView, detail: V.detailView };
V.state = Object.create(null);   // per view name: sort, search, filters (kept across refreshes)
V.history = [];
V.busy = 0;
V.cleanups = [];
V.root = document.getElementById("app");
V.statusEl = V.el("div", "status");
V.statusEl.setAttribute("role", "status");
V.status = function (text, cls) {
	V.statusEl.className = "status " + (cls || "");
	V.statusEl.textContent = V.clip(text, 600);
};
V.fatal = function (e) { V.status("The view failed: " + V.msg(e), "err"); };
V.stopTimers = function () { V.cleanups.splice(0).forEach(function (f) { f(); }); };
V.stopAuto = function () { clearInterval(V.auto); V.auto = null; };
V.vmOf = function (res) {
	var vm = V.obj(V.obj(res) && V.obj(res._meta) && res._meta["arcane-mcp/view"]);
	return vm && vm.version === 1 && Object.prototype.hasOwnProperty.call(V.widgets, vm.widget) ? vm : null;
};
V.textOf = function (res) {
	return V.arr(res && res.content).map(function (c) { return V.obj(c) && c.type === "text" ? V.txt(c.text) : ""; })
		.filter(Boolean).join("\n");
};
V.firstLine = function (res) { return V.clip(V.textOf(res).split("\n")[0].trim(), 300); };

V.applyContext = function (c) {
	var d = document.documentElement, vars = V.obj(V.obj(c) && V.obj(c.styles) && c.styles.variables);
	if (!V.obj(c)) return;
	if (c.theme === "light" || c.theme === "dark") d.setAttribute("data-theme", c.theme);
	if (typeof c.locale === "string" && c.locale.length < 40) V.locale = c.locale;
	var dim = V.obj(c.containerDimensions);   // a fixed height: fill it and scroll inside; a maximum: keep under it
	if (dim) { d.style.height = dim.height > 0 ? "100vh" : ""; d.style.maxHeight = dim.maxHeight > 0 ? dim.maxHeight + "px" : ""; }
	if (vars) Object.keys(vars).slice(0, 200).forEach(function (k) {
		if (/^--[\w-]{1,64}$/.test(k) && typeof vars[k] === "string" && vars[k].length < 300) d.style.setProperty(k, vars[k]);
	});
};

/* A CallToolResult from the host: its view model's widget, or its text. */
V.render = function (res) {
	var vm = V.vmOf(res);
	V.status("");
	V.history = [];
	if (vm) return V.show(vm);
	V.stopTimers();
	V.cur = null;
	V.root.replaceChildren(V.statusEl, V.el("pre", "text" + (V.obj(res) && res.isError ? " error" : ""),
		V.clip(V.textOf(res) || "(no text in the result)", 200000)));
	V.drawn("text");
};
V.header = function (vm) {
	var bar = V.el("div", "bar"), env = V.obj(vm.environment);
	if (V.history.length) bar.appendChild(V.button("\u2190 Back", function () { V.show(V.history.pop()); V.refresh(); }));
	bar.appendChild(V.el("h1", "v", V.clip(V.txt(vm.title, V.txt(vm.view, "Result")), 200)));
	if (env && V.txt(env.name, V.txt(env.id))) {
		var chip = V.el("span", "chip v", V.clip(V.txt(env.name, "environment " + V.txt(env.id)), 60));
		chip.title = "Environment " + V.clip(V.txt(env.id), 100);
		bar.appendChild(chip);
	}
	bar.appendChild(V.el("span", "grow"));
	V.arr(vm.actions).forEach(function (a) {
		if (!V.obj(a) || !V.call(a.call)) return;
		var b = bar.appendChild(V.actButton(a, "", function () { V.run(a, null, b, ""); }));
	});
	if (!V.call(vm.refresh)) return bar;
	bar.appendChild(V.button("Refresh", function () { V.refresh(); })).id = "refresh";
	var secs = Math.max(V.num(vm.refreshSeconds), 5);
	if (V.num(vm.refreshSeconds) > 0 && secs < 86400) {   // auto-refresh: off until pressed, at most 60 runs, stops when the view changes
		var auto = bar.appendChild(V.button("Auto " + secs + " s", function () {
			var left = 60;
			if (V.auto) V.stopAuto();
			else V.auto = setInterval(function () {
				if (--left < 0) { V.stopAuto(); V.status("Auto-refresh stopped after 60 runs."); } else if (!V.busy) V.refresh();
			}, secs * 1000);
			auto.setAttribute("aria-pressed", String(!!V.auto));
		}));
		auto.setAttribute("aria-pressed", String(!!V.auto));
	}
	return bar;
};
V.show = function (vm) {
	var name = V.txt(vm.view, "_"), st = V.state[name] || (V.state[name] = {}), body, was = V.label(document.activeElement) || V.was;
	V.was = "";
	V.stopTimers();
	if (V.cur && V.cur.view !== vm.view) V.stopAuto();
	V.cur = vm;
	try {
		body = vm.isError ? V.el("div", "error", V.clip(V.txt(vm.message, "The call failed."), 4000)) : V.widgets[vm.widget](vm, st);
	} catch (e) {
		body = V.el("div", "error", "This view could not be drawn: " + V.msg(e));
	}
	V.root.replaceChildren(V.header(vm), V.statusEl, body);
	V.refocus(was);
	V.drawn(vm.widget);
};
/* Keyboard focus survives a redraw: the control with the same label gets it back. */
V.label = function (e) { return e && e.matches("#app *") ? e.getAttribute("aria-label") || e.textContent : ""; };
V.refocus = function (was) {
	var e = was && [].find.call(V.root.querySelectorAll("button, input, select"), function (x) { return V.label(x) === was; });
	if (e) { e.focus(); if (e.type === "search") e.setSelectionRange(1e6, 1e6); }
};
/* #app's data-widget (table|logs|chart|detail|text) and data-renders (a count) say what was last drawn. */
V.drawn = function (widget) {
	V.root.dataset.widget = widget;
	V.root.dataset.renders = (+V.root.dataset.renders || 0) + 1;
	V.bridge.sizeSoon();
};

/* Run an ACTION ($row placeholders filled from row), show its outcome (an error as an error), then
	 re-run refresh; a non-destructive action whose result is another re-runnable view opens it (with Back). */
V.run = function (a, row, btn, who) {
	var c = V.call(a.call), label = V.txt(a.label, V.txt(a.id, "Action")) + (who ? " " + who : ""), old = btn.textContent, from = V.cur;
	if (!c) return;
	V.was = document.activeElement === btn ? V.label(btn) : "";   // a disabled button loses the focus
	btn.disabled = true;
	btn.setAttribute("aria-busy", "true");
	btn.textContent = old + "\u2026";
	V.status(label + "\u2026");
	V.busy++;
	return V.bridge.callTool({ name: c.name, arguments: row ? V.fill(c.arguments, row, 0) : c.arguments }).then(function (res) {
		var vm = V.vmOf(res), line = V.firstLine(res);
		if (V.obj(res) && res.isError) V.status(label + " failed: " + (line || "error"), "err");
		else {
			V.status(label + ": done" + (line ? " \u2014 " + line : ""), "ok");
			if (vm && from && vm.view !== from.view && V.call(vm.refresh) && a.destructive !== true) { V.history.push(from); return V.show(vm); }
		}
		return V.refresh();
	}, function (e) { V.status(label + " failed: " + V.msg(e), "err"); }).then(function () {
		V.busy--;
		btn.disabled = false;
		btn.removeAttribute("aria-busy");
		btn.textContent = old;
	});
};
V.refresh = function () {
	var vm = V.cur, c = vm && V.call(vm.refresh), b = document.getElementById("refresh");
	if (!c) return Promise.resolve();
	if (b) { V.was = document.activeElement === b ? "Refresh" : V.was; b.disabled = true; }
	V.busy++;
	return V.bridge.callTool(c).then(function (res) {
		var nvm = V.vmOf(res);
		if (V.cur !== vm) return;
		if (nvm) V.show(nvm);
		else if (V.obj(res) && res.isError) V.status("Refresh failed: " + V.firstLine(res), "err");
	}, function (e) { V.status("Refresh failed: " + V.msg(e), "err"); }).then(function () {
		V.busy--;
		if (b) b.disabled = false;
	});
};

V.root.prepend(V.statusEl);
V.bridge.on("ui/notifications/tool-input", function () { V.status("Running\u2026"); });
/* a view's own calls come back as answers; a result notified meanwhile is not drawn over them */
V.bridge.on("ui/notifications/tool-result", function (p) { if (!V.busy) V.render(p); });
V.bridge.on("ui/notifications/tool-cancelled", function (p) { V.status("The call was cancelled. " + V.clip(V.txt(p.reason), 200), "err"); });
V.bridge.on("ui/notifications/host-context-changed", V.applyContext);
V.bridge.on("ui/resource-teardown", function () { V.stopTimers(); V.stopAuto(); });
V.bridge.initialize().then(function (r) { V.applyContext(r.hostContext); },
	function (e) { V.status("The host did not answer ui/initialize: " + e.message, "err"); });
