/* bridge.js: the view's side of MCP Apps (JSON-RPC 2.0 over postMessage with window.parent, the host).
	 Messages from any other source are ignored. */
V.bridge = (function () {
	var nextId = 1, pending = Object.create(null), handlers = Object.create(null), size = "", queued = false;
	function post(m) { m.jsonrpc = "2.0"; if (window.parent !== window) window.parent.postMessage(m, "*"); }
	function request(method, params) {
		var id = nextId++;
		return new Promise(function (resolve, reject) {
			pending[id] = { resolve: resolve, reject: reject };
			post({ id: id, method: method, params: params });
		});
	}
	function notify(method, params) { post({ method: method, params: params }); }
	function onRequest(m) {
		var h = m.method === "ping" ? function () { return {}; } : handlers[m.method];
		if (!h) return post({ id: m.id, error: { code: -32601, message: "Method not found" } });
		Promise.resolve(V.obj(m.params) || {}).then(h).then(function (r) { post({ id: m.id, result: V.obj(r) || {} }); },
			function (e) { post({ id: m.id, error: { code: -32000, message: V.msg(e) } }); });
	}
	window.addEventListener("message", function (ev) {
		var m = V.obj(ev.data), p;
		if (ev.source !== window.parent || window.parent === window || !m || m.jsonrpc !== "2.0") return;
		if (typeof m.method === "string") {
			if (m.id !== undefined && m.id !== null) return onRequest(m);
			if (handlers[m.method]) try { handlers[m.method](V.obj(m.params) || {}); } catch (e) { V.fatal(e); }
		} else if (typeof m.id === "number" && (p = pending[m.id])) {
			delete pending[m.id];
			if (m.error) p.reject(new Error(V.txt(V.obj(m.error) && m.error.message, "The host refused the request")));
			else p.resolve(m.result);
		}
	});
	function sizeSoon() {
		if (queued) return;
		queued = true;
		requestAnimationFrame(function () {
			var d = document.documentElement, w = Math.ceil(d.scrollWidth), h = Math.ceil(d.getBoundingClientRect().height);
			queued = false;
			if (w + "x" + h !== size) { size = w + "x" + h; notify("ui/notifications/size-changed", { width: w, height: h }); }
		});
	}
	if (window.ResizeObserver) new ResizeObserver(sizeSoon).observe(document.documentElement);
	return {
		on: function (method, fn) { handlers[method] = fn; }, sizeSoon: sizeSoon,
		callTool: function (c) { return request("tools/call", { name: c.name, arguments: c.arguments }); },
		initialize: function () {
			return request("ui/initialize", { appInfo: { name: "arcane-mcp views", version: "1" },
				appCapabilities: { availableDisplayModes: ["inline"] }, protocolVersion: "2026-01-26" }).then(function (r) {
				notify("ui/notifications/initialized", {});
				return V.obj(r) || {};
			});
		}
	};
})();
