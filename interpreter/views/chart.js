/* chart.js: an SVG line chart per charts[] entry, a legend with last values, an aria-label with last/min/max. */
V.svg = function (tag, cls, attrs) {
	var n = document.createElementNS("http://www.w3.org/2000/svg", tag);
	if (cls) n.setAttribute("class", cls);
	for (var k in attrs) n.setAttribute(k, String(attrs[k]));
	return n;
};
V.unitFmt = function (unit) {
	if (unit === "bytes") return V.fmtBytes;
	if (unit === "bytes/s") return function (n) { return V.fmtBytes(n) + "/s"; };
	if (unit === "%") return function (n) { return V.fmtNum(n, 1) + " %"; };
	var u = typeof unit === "string" ? " " + V.clip(unit, 12) : "";
	return function (n) { return V.fmtNum(n) + u; };
};
/* A round axis maximum at or above v (a power of 1024 apart for bytes). */
V.nice = function (v, base) {
	var s = 1;
	while (base === 1024 && v / s >= 1024) s *= 1024;
	var m = Math.pow(10, Math.floor(Math.log10(v / s)));
	var f = [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].filter(function (k) { return k * m >= v / s; })[0];
	return f * m * s;
};
V.chartView = function (vm) {
	var box = V.el("div", "charts"), list = V.arr(vm.charts).filter(V.obj).slice(0, 12);
	list.forEach(function (c) { box.appendChild(V.chart(c)); });
	if (!list.length) box.appendChild(V.el("p", "note", "No samples to draw."));
	return box;
};
V.chart = function (c) {
	var W = 320, H = 130, L = 52, B = 18, fmt = V.unitFmt(c.unit), lo = Infinity, hi = -Infinity, t0 = Infinity, t1 = -Infinity;
	var series = V.arr(c.series).filter(V.obj).slice(0, 6).map(function (s) {
		var pts = V.arr(s.points).filter(function (p) {
			return Array.isArray(p) && typeof p[0] === "number" && isFinite(p[0]) && typeof p[1] === "number" && isFinite(p[1]);
		});
		if (pts.length > 1000) { var step = pts.length / 1000; pts = pts.filter(function (p, i) { return i % step < 1; }); }
		pts.forEach(function (p) { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); t0 = Math.min(t0, p[0]); t1 = Math.max(t1, p[0]); });
		return { label: V.clip(V.txt(s.label, V.txt(s.key, "series")), 60), pts: pts };
	});
	var title = V.clip(V.txt(c.title, "Chart"), 100), fig = V.el("figure"), cap = V.el("figcaption");
	fig.appendChild(V.add(cap, V.el("span", "v", title)));
	if (!isFinite(lo)) { fig.appendChild(V.el("p", "note", "No samples.")); return fig; }
	var y0 = Math.min(0, lo), y1 = V.nice(hi > y0 ? hi : y0 + 1, /^bytes/.test(c.unit) ? 1024 : 1000);
	var x = function (t) { return L + (t1 > t0 ? (t - t0) / (t1 - t0) : 0.5) * (W - L - 4); };
	var y = function (v) { return 4 + (1 - (v - y0) / (y1 - y0)) * (H - B - 4); };
	var svg = V.svg("svg", "", { viewBox: "0 0 " + W + " " + H, role: "img" });
	[y0, (y0 + y1) / 2, y1].forEach(function (v) {
		svg.appendChild(V.svg("line", "grid", { x1: L, x2: W - 4, y1: y(v), y2: y(v) }));
		var t = V.svg("text", "", { x: L - 4, y: y(v) + 3, "text-anchor": "end" });
		t.textContent = fmt(v);
		svg.appendChild(t);
	});
	[[t0, "start"], [t1, "end"]].forEach(function (a) {
		var t = V.svg("text", "", { x: a[1] === "start" ? L : W - 4, y: H - 4, "text-anchor": a[1] });
		t.textContent = V.fmtTime(a[0], "s");
		svg.appendChild(t);
	});
	var legend = V.el("ul", "legend"), said = [];
	series.forEach(function (s, i) {
		if (!s.pts.length) return;
		var d = s.pts.map(function (p, j) { return (j ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1); }).join("");
		var path = V.svg("path", "", { d: s.pts.length > 1 ? d : d + "h1" }), sw = V.el("span", "sw");
		path.style.stroke = sw.style.background = "var(--s" + i + ")";
		svg.appendChild(path);
		var vals = s.pts.map(function (p) { return p[1]; }), last = fmt(vals[vals.length - 1]);
		var li = V.el("li");
		V.add(li, sw, V.el("span", "v", s.label + " "), V.el("b", "", last));
		legend.appendChild(li);
		said.push(s.label + ": last " + last + ", min " + fmt(Math.min.apply(null, vals)) + ", max " + fmt(Math.max.apply(null, vals)));
	});
	svg.setAttribute("aria-label", "Chart " + title + ". " + said.join("; ") + ". From " + V.fmtTime(t0, "f") + " to " + V.fmtTime(t1, "f") + ".");
	V.add(fig, svg, legend);
	return fig;
};
