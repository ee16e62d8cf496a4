/* bridge.js: the view's side of the MCP Apps postMessage protocol (JSON-RPC 2.0 with the host,
   which is window.parent). Messages from any other source are ignored. */
V.bridge = (function () {
  var nextId = 1, pending = Object.create(null), handlers = Object.create(null), lastSize = "";
  function post(msg) { if (window.parent && window.parent !== window) window.parent.postMessage(msg, "*"); }
  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      post({ jsonrpc: "2.0", id: id, method: method, params: params || {} });
    });
  }
  function notify(method, params) { post({ jsonrpc: "2.0", method: method, params: params || {} }); }
  function answer(id, result, error) {
    var m = { jsonrpc: "2.0", id: id };
    if (error) m.error = error; else m.result = result;
    post(m);
  }
  function onRequest(m) {
    var h = handlers[m.method];
    if (m.method === "ping") return answer(m.id, {});
    if (!h) return answer(m.id, null, { code: -32601, message: "Method not found" });
    Promise.resolve().then(function () { return h(m.params || {}); }).then(
      function (r) { answer(m.id, r || {}); },
      function (e) { answer(m.id, null, { code: -32000, message: String(e && e.message || e) }); });
  }
  window.addEventListener("message", function (ev) {
    if (ev.source !== window.parent || window.parent === window) return;
    var m = V.obj(ev.data);
    if (!m || m.jsonrpc !== "2.0") return;
    if (typeof m.method === "string") {
      if (m.id !== undefined && m.id !== null) return onRequest(m);
      var h = handlers[m.method];
      if (h) { try { h(V.obj(m.params) || {}); } catch (e) { V.fatal(e); } }
      return;
    }
    var p = typeof m.id === "number" && pending[m.id];
    if (!p) return;
    delete pending[m.id];
    if (m.error) {
      var e = V.obj(m.error) || {};
      p.reject(new Error(typeof e.message === "string" ? e.message : "The host refused the request"));
    } else p.resolve(m.result);
  });
  function reportSize() {
    var d = document.documentElement, r = d.getBoundingClientRect();
    var size = { width: Math.ceil(d.scrollWidth), height: Math.ceil(Math.max(r.height, document.body.scrollHeight)) };
    var k = size.width + "x" + size.height;
    if (k !== lastSize) { lastSize = k; notify("ui/notifications/size-changed", size); }
  }
  var queued = false;
  function sizeSoon() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(function () { queued = false; reportSize(); });
  }
  if (window.ResizeObserver) new ResizeObserver(sizeSoon).observe(document.documentElement);
  return {
    request: request, notify: notify, sizeSoon: sizeSoon,
    on: function (method, fn) { handlers[method] = fn; },
    initialize: function () {
      return request("ui/initialize", {
        appInfo: { name: "arcane-mcp views", version: "1" },
        appCapabilities: { availableDisplayModes: ["inline"] },
        protocolVersion: "2026-01-26"
      }).then(function (r) {
        notify("ui/notifications/initialized", {});
        return V.obj(r) || {};
      });
    },
    callTool: function (call) { return request("tools/call", { name: call.name, arguments: call.arguments }); }
  };
})();
