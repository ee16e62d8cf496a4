/* main.js: the router. Picks the widget named by the result's view model, else shows the result's text. */
V.widgets = { table: V.tableView, logs: V.logsView, chart: V.chartView, detail: V.detailView };
V.state = Object.create(null);   // per view name: sort, search, filters (kept across refreshes)
V.history = [];
V.cur = null;
V.busy = 0;
V.cleanups = [];
V.statusEl = V.el("div", "status");
V.statusEl.setAttribute("role", "status");
V.root = document.getElementById("app");
try { V.config = V.obj(JSON.parse(document.getElementById("arcane-config").textContent)) || {}; }
catch (e) { V.config = {}; }

V.status = function (text, cls) {
  V.statusEl.className = "status" + (cls ? " " + cls : "");
  V.statusEl.textContent = V.clip(text, 600);
};
V.fatal = function (e) { V.status("The view failed: " + (e && e.message || e), "err"); };
V.stopTimers = function () { V.cleanups.splice(0).forEach(function (f) { f(); }); };
V.vmOf = function (res) {
  var meta = V.obj(res && res._meta), vm = meta && V.obj(meta["arcane-mcp/view"]);
  return vm && vm.version === 1 && V.widgets[vm.widget] && Object.prototype.hasOwnProperty.call(V.widgets, vm.widget) ? vm : null;
};
V.textOf = function (res) {
  return V.arr(res && res.content).filter(function (c) { return V.obj(c) && c.type === "text" && typeof c.text === "string"; })
    .map(function (c) { return c.text; }).join("\n");
};
V.firstLine = function (res) { return V.clip(V.textOf(res).split("\n")[0].trim(), 300); };

V.applyContext = function (c) {
  c = V.obj(c) || {};
  var d = document.documentElement;
  if (c.theme === "light" || c.theme === "dark") d.setAttribute("data-theme", c.theme);
  if (typeof c.locale === "string" && c.locale.length < 40) V.locale = c.locale;
  var vars = V.obj(V.obj(c.styles) && c.styles.variables);
  if (vars) Object.keys(vars).slice(0, 200).forEach(function (k) {
    var v = vars[k];
    if (/^--[a-zA-Z0-9-]{1,64}$/.test(k) && typeof v === "string" && v.length < 300) d.style.setProperty(k, v);
  });
  V.bridge.sizeSoon();
};

/* A CallToolResult from the host: the view model's widget, or the text. */
V.render = function (res) {
  res = V.obj(res) || {};
  var vm = V.vmOf(res);
  if (!V.busy) V.status("", "");
  if (vm) { V.history = []; return V.show(vm); }
  V.stopTimers();
  V.cur = null;
  var pre = V.el("pre", "text" + (res.isError ? " error" : ""), V.clip(V.textOf(res) || "(no text in the result)", 200000));
  V.root.replaceChildren(V.statusEl, pre);
  V.bridge.sizeSoon();
};

V.header = function (vm) {
  var bar = V.el("div", "bar"), env = V.obj(vm.environment);
  if (V.history.length) bar.appendChild(V.button("\u2190 Back", function () { V.show(V.history.pop()); V.refresh(); }));
  bar.appendChild(V.el("h1", "v", V.clip(V.txt(vm.title, V.txt(vm.view, "Result")), 200)));
  if (env && (typeof env.name === "string" || typeof env.id === "string")) {
    var chip = V.el("span", "chip v", V.clip(V.txt(env.name, V.txt(env.id)), 60));
    chip.title = "Environment " + V.clip(V.txt(env.id), 100);
    bar.appendChild(chip);
  }
  bar.appendChild(V.el("span", "grow"));
  V.arr(vm.actions).forEach(function (a) {
    if (!V.obj(a) || !V.call(a.call)) return;
    var b = V.button(V.txt(a.label, V.txt(a.id, "Run")), function () { V.run(a, null, b, ""); }, a.destructive ? "danger" : "");
    if (a.destructive) b.setAttribute("aria-label", V.txt(a.label, "Run") + " (destructive)");
    bar.appendChild(b);
  });
  if (V.call(vm.refresh)) {
    var r = V.button("Refresh", function () { V.refresh(); });
    r.id = "refresh";
    bar.appendChild(r);
    var secs = V.num(vm.refreshSeconds);
    if (isFinite(secs) && secs > 0) bar.appendChild(V.autoButton(Math.max(secs, 5)));
  }
  return bar;
};
/* Auto-refresh: off until pressed; at most 60 runs, stops on navigation. */
V.autoButton = function (secs) {
  var b = V.button("Auto " + secs + " s", function () {
    if (V.auto) { clearInterval(V.auto); V.auto = null; b.setAttribute("aria-pressed", "false"); return; }
    var left = 60;
    V.auto = setInterval(function () {
      if (--left < 0) { clearInterval(V.auto); V.auto = null; V.status("Auto-refresh stopped after 60 runs.", ""); return; }
      if (!V.busy) V.refresh();
    }, secs * 1000);
    b.setAttribute("aria-pressed", "true");
  });
  b.setAttribute("aria-pressed", V.auto ? "true" : "false");
  return b;
};

V.show = function (vm) {
  V.stopTimers();
  if (V.cur && V.cur.view !== vm.view && V.auto) { clearInterval(V.auto); V.auto = null; }
  V.cur = vm;
  var name = V.txt(vm.view, "_"), st = V.state[name] || (V.state[name] = {}), body;
  try {
    body = vm.isError ? V.el("div", "error", V.clip(V.txt(vm.message, "The call failed."), 4000))
      : V.widgets[vm.widget](vm, st);
  } catch (e) {
    body = V.el("div", "error", "This view could not be drawn: " + (e && e.message || e));
  }
  V.root.replaceChildren(V.header(vm), V.statusEl, body);
  V.bridge.sizeSoon();
};

/* Run an ACTION (row placeholders filled from row), show its outcome, then re-run refresh. */
V.run = function (a, row, btn, who) {
  var c = V.call(a.call);
  if (!c) return;
  c = { name: c.name, arguments: row ? V.fill(c.arguments, row, 0) : c.arguments };
  var label = V.txt(a.label, V.txt(a.id, "Action")) + (who ? " " + who : ""), old = btn.textContent;
  btn.disabled = true;
  btn.setAttribute("aria-busy", "true");
  btn.textContent = old + "\u2026";
  V.status(label + ": waiting for the result\u2026", "");
  V.busy++;
  var from = V.cur;
  return V.bridge.callTool(c).then(function (res) {
    res = V.obj(res) || {};
    var vm = V.vmOf(res), line = V.firstLine(res);
    if (res.isError) { V.status(label + " failed: " + (line || "error"), "err"); return V.refresh(); }
    V.status(label + ": done" + (line ? " \u2014 " + line : ""), "ok");
    if (vm && from && vm.view !== from.view && !a.destructive) { V.history.push(from); V.show(vm); return; }
    return V.refresh();
  }, function (e) {
    V.status(label + " failed: " + (e && e.message || e), "err");
  }).then(function () {
    V.busy--;
    btn.disabled = false;
    btn.removeAttribute("aria-busy");
    btn.textContent = old;
  });
};
V.refresh = function () {
  var vm = V.cur, c = vm && V.call(vm.refresh);
  if (!c) return Promise.resolve();
  var b = document.getElementById("refresh");
  if (b) b.disabled = true;
  V.busy++;
  return V.bridge.callTool(c).then(function (res) {
    var nvm = V.vmOf(res);
    if (V.cur !== vm) return;
    if (nvm) V.show(nvm);
    else if (res && res.isError) V.status("Refresh failed: " + V.firstLine(res), "err");
  }, function (e) { V.status("Refresh failed: " + (e && e.message || e), "err"); }).then(function () {
    V.busy--;
    if (b) b.disabled = false;
  });
};

V.bridge.on("ui/notifications/tool-input", function () { V.status("Running\u2026", ""); });
V.bridge.on("ui/notifications/tool-result", function (p) { if (!V.busy) V.render(p); });
V.bridge.on("ui/notifications/tool-cancelled", function (p) {
  V.status("The call was cancelled" + (typeof p.reason === "string" ? ": " + V.clip(p.reason, 200) : "."), "err");
  if (!V.cur) V.root.replaceChildren(V.statusEl);
});
V.bridge.on("ui/notifications/host-context-changed", V.applyContext);
V.bridge.on("ui/resource-teardown", function () {
  V.stopTimers();
  if (V.auto) clearInterval(V.auto);
  return {};
});
V.bridge.initialize().then(function (r) { V.applyContext(r.hostContext); },
  function (e) { V.status("The host did not answer ui/initialize: " + e.message, "err"); });
