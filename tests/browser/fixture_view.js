// A tiny view for the test host's own tests: the view side of the bridge and nothing more.
// With config.unsafe it inserts names as HTML, the mistake the safety checks must catch.
"use strict";
(function () {
  const config = JSON.parse(document.getElementById("fixture-config").textContent);
  const pending = new Map();
  let nextId = 1;
  let model = null;

  function post(message) { window.parent.postMessage(message, "*"); }
  function request(method, params) {
    const id = nextId++;
    post({jsonrpc: "2.0", id: id, method: method, params: params});
    return new Promise(function (resolve, reject) { pending.set(id, {resolve: resolve, reject: reject}); });
  }
  function sizeChanged() {
    post({jsonrpc: "2.0", method: "ui/notifications/size-changed",
          params: {width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight}});
  }
  function render(result) {
    const meta = (result && result._meta) || {};
    model = meta["arcane-mcp/view"] || null;
    const list = document.getElementById("rows");
    list.textContent = "";
    const rows = model && Array.isArray(model.rows) ? model.rows : [];
    rows.forEach(function (row) {
      const item = document.createElement("li");
      if (config.unsafe) item.innerHTML = String(row.name);
      else item.textContent = String(row.name);
      list.appendChild(item);
    });
    const text = (result && result.content && result.content[0] && result.content[0].text) || "";
    document.getElementById("out").textContent = result && result.isError ? "error: " + text : text.split("\n")[0];
    document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
    sizeChanged();
  }
  function theme(context) {
    if (context && context.theme) document.body.classList.toggle("dark", context.theme === "dark");
  }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) return;
    const msg = event.data || {};
    if (msg.id !== undefined && !msg.method && pending.has(msg.id)) {
      const waiter = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) waiter.reject(msg.error); else waiter.resolve(msg.result);
      return;
    }
    if (msg.method === "ui/notifications/tool-result") render(msg.params);
    else if (msg.method === "ui/notifications/host-context-changed") theme(msg.params);
    else if (msg.method === "ui/resource-teardown") post({jsonrpc: "2.0", id: msg.id, result: {}});
  });

  document.getElementById("act").addEventListener("click", function () {
    if (config.alert) window.alert("a dialog");
    if (config.read) {
      request("resources/read", {uri: config.read}).then(function (res) {
        document.getElementById("out").textContent = res.contents[0].mimeType;
        document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
      });
      return;
    }
    if (!config.call) return;
    request("tools/call", config.call).then(render, function (error) {
      document.getElementById("out").textContent = "refused: " + error.message;
    });
  });

  request("ui/initialize", {appInfo: {name: "fixture", version: "1"}, appCapabilities: {},
                            protocolVersion: "2026-01-26"}).then(function (result) {
    theme(result.hostContext);
    post({jsonrpc: "2.0", method: "ui/notifications/initialized", params: {}});
  });
})();
