"use strict";
/* dom.js: DOM and format helpers. Data goes in as textContent (or a property such as title), never as markup. */
var V = {};
V.MAXTEXT = 240;
V.TONES = ["ok", "warn", "bad", "info", "muted"];
V.KINDS = ["text", "badge", "number", "bytes", "time", "id", "percent"];

V.el = function (tag, cls, text) {
	var n = document.createElement(tag);
	if (cls) n.className = cls;
	if (text !== undefined && text !== null) n.textContent = String(text);
	return n;
};
V.add = function (parent) {
	for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
	return parent;
};
V.obj = function (v) { return v !== null && typeof v === "object" && !Array.isArray(v) ? v : null; };
V.arr = function (v) { return Array.isArray(v) ? v : []; };
V.txt = function (v, fallback) {
	return typeof v === "string" ? v : typeof v === "number" && isFinite(v) ? String(v) : fallback || "";
};
/* Any JSON value as short text, without recursion (deep junk cannot blow the stack). */
V.str = function (v) {
	if (typeof v === "string") return v;
	if (typeof v === "number" && isFinite(v)) return String(v);
	if (typeof v === "boolean") return v ? "yes" : "no";
	if (Array.isArray(v)) return v.slice(0, 20).map(function (x) { return x && typeof x === "object" ? "\u2026" : V.str(x); }).join(", ") +
		(v.length > 20 ? ", \u2026" : "");
	return v && typeof v === "object" ? "{\u2026}" : "\u2014";
};
V.clip = function (s, max) {
	max = max || V.MAXTEXT;
	return s.length > max ? s.slice(0, max) + "\u2026 (+" + (s.length - max) + ")" : s;
};
/* A number from a number or a numeric string; NaN otherwise. */
V.num = function (v) {
	return typeof v === "number" ? v : typeof v === "string" && v.trim() && isFinite(v) ? Number(v) : NaN;
};
V.time = function (v) {
	if (typeof v === "number" && isFinite(v)) return v < 1e11 ? v * 1000 : v;
	if (typeof v === "string" && v) { var t = Date.parse(v); return isNaN(t) ? NaN : t; }
	return NaN;
};
V.fmtNum = function (n, digits) {
	if (!isFinite(n)) return "\u2014";
	try { return n.toLocaleString(V.locale, { maximumFractionDigits: digits === undefined ? 2 : digits }); }
	catch (e) { return String(n); }
};
V.fmtBytes = function (n) {
	if (!isFinite(n)) return "\u2014";
	var units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], i = 0, a = Math.abs(n);
	while (a >= 1024 && i < units.length - 1) { a /= 1024; i++; }
	return V.fmtNum(n < 0 ? -a : a, a < 10 ? 1 : 0) + " " + units[i];
};
V.msg = function (e) { return String(e && e.message || e); };
V.pad = function (n) { return n < 10 ? "0" + n : String(n); };
/* Local time: "2026-12-02 10:04" (mode "s": "10:04:05"; mode "f": date and seconds). */
V.fmtTime = function (t, mode) {
	var d = new Date(t);
	if (!isFinite(t) || isNaN(d.getTime())) return "\u2014";
	var hm = V.pad(d.getHours()) + ":" + V.pad(d.getMinutes()), s = ":" + V.pad(d.getSeconds());
	return mode === "s" ? hm + s : d.getFullYear() + "-" + V.pad(d.getMonth() + 1) + "-" + V.pad(d.getDate()) + " " + hm + (mode === "f" ? s : "");
};
/* A value of a column kind as text (strings stay as they are). */
V.fmt = function (v, kind) {
	if (typeof v === "string" && kind !== "time") return v;
	if (kind === "number") return V.fmtNum(V.num(v));
	if (kind === "bytes") return V.fmtBytes(V.num(v));
	if (kind === "percent") { var p = V.num(v); return isFinite(p) ? V.fmtNum(p, 1) + " %" : "\u2014"; }
	if (kind === "time") { var t = V.time(v); return isFinite(t) ? V.fmtTime(t) : V.str(v); }
	return V.str(v);
};
/* A sort key: a number for numeric kinds and times, else lower-cased text. */
V.key = function (v, kind) {
	if (kind === "number" || kind === "bytes" || kind === "percent") return V.num(v);
	if (kind === "time") return V.time(v);
	return V.str(v).toLowerCase();
};
V.tone = function (tones, value) {
	var t = V.obj(tones) && typeof value === "string" && Object.prototype.hasOwnProperty.call(tones, value)
		? tones[value] : null;
	return V.TONES.indexOf(t) >= 0 ? t : null;
};
/* One value as a node: a badge (text + tone class) or isolated, clipped text. */
V.cell = function (v, col, wide) {
	var kind = V.KINDS.indexOf(col.kind) >= 0 ? col.kind : "text";
	var full = V.fmt(v, kind) || "\u2014", shown = kind === "id" && !wide && full.length > 13 ? full.slice(0, 12) + "\u2026" : V.clip(full);
	var n;
	if (kind === "badge") {
		var t = V.tone(col.tones, v);
		n = V.el("span", "badge" + (t ? " t-" + t : ""), V.clip(full, 60));
	} else {
		n = V.el("span", kind === "id" ? "v id" : "v", shown);
	}
	// a tooltip names its column: no attribute starts with a value
	if (full.length > 30 || kind === "time") n.title = V.clip(V.txt(col.label, "Value") + ": " + (kind === "time" ? V.fmtTime(V.time(v), "f") + " (" + V.str(v) + ")" : full), 2000);
	return n;
};
V.input = function (type, label, value) {
	var i = V.el("input");
	i.type = type;
	if (type === "search") { i.placeholder = label; i.value = value || ""; } else i.checked = !!value;
	i.setAttribute("aria-label", label);
	return i;
};
V.button = function (label, onclick, cls) {
	var b = V.el("button", cls || "", label);
	b.type = "button";
	b.addEventListener("click", onclick);
	return b;
};
/* An ACTION's button: its label (and the row's name) for screen readers, a destructive one marked. */
V.actButton = function (a, who, onclick) {
	var bad = a.destructive === true, b = V.button(V.txt(a.label, V.txt(a.id, "Run")), onclick, bad ? "danger" : "");
	b.setAttribute("aria-label", b.textContent + (who ? " " + who : "") + (bad ? " (destructive)" : ""));
	return b;
};
/* {"$row": key} anywhere in a CALL's arguments becomes the row's value. */
V.fill = function (v, row, depth) {
	if (depth > 32) return null;
	if (Array.isArray(v)) return v.map(function (x) { return V.fill(x, row, depth + 1); });
	var o = V.obj(v);
	if (!o) return v;
	var keys = Object.keys(o);
	if (keys.length === 1 && keys[0] === "$row" && typeof o.$row === "string") {
		var r = V.obj(row);
		return r && Object.prototype.hasOwnProperty.call(r, o.$row) ? r[o.$row] : null;
	}
	return Object.fromEntries(keys.map(function (k) { return [k, V.fill(o[k], row, depth + 1)]; }));   // own keys, even "__proto__"
};
/* A CALL: {"name": text, "arguments": object}; anything else is not callable. */
V.call = function (c) {
	c = V.obj(c);
	return c && typeof c.name === "string" && c.name ? { name: c.name, arguments: V.obj(c.arguments) || {} } : null;
};
