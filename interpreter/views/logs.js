/* logs.js: a log capture: stderr marked, search that highlights or filters, bounded follow, autoscroll. */
V.MAXLINES = 5000;
V.logsView = function (vm, st) {
	var wrap = V.el("div"), bar = V.el("div", "bar"), q = V.input("search", "Search the log", st.q);
	var only = V.input("checkbox", "Only matches", st.only), box = V.el("div", "log"), note = V.el("p", "note");
	var lines = [], dropped = 0, hasTime = V.arr(vm.lines).some(function (l) { return V.obj(l) && l.time; });
	box.setAttribute("role", "region");
	box.setAttribute("aria-label", "Log lines: " + V.clip(V.txt(vm.title), 200));
	box.tabIndex = 0;
	V.add(bar, q, V.add(V.el("label"), only, document.createTextNode("Only matches")));
	if (V.call(vm.follow)) bar.appendChild(V.followButton(vm, function (more) { add(more); draw(); }));
	q.addEventListener("input", function () { st.q = q.value; draw(); });
	only.addEventListener("change", function () { st.only = only.checked; draw(); });

	function add(list) {
		var fresh = V.arr(list).filter(V.obj), k = V.overlap(lines, fresh);
		for (var i = k; i < fresh.length; i++) lines.push(fresh[i]);
		if (lines.length > V.MAXLINES) { dropped += lines.length - V.MAXLINES; lines.splice(0, lines.length - V.MAXLINES); }
	}
	function draw() {
		var atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 8, needle = (st.q || "").toLowerCase(), n = 0;
		var out = document.createDocumentFragment();
		lines.forEach(function (l) {
			var text = V.clip(V.txt(l.text, V.str(l.text)), 10000);
			var hit = needle && text.toLowerCase().indexOf(needle) >= 0;
			if (hit) n++;
			if (needle && st.only && !hit) return;
			out.appendChild(V.logLine(l, text, hit ? needle : "", hasTime));
		});
		box.replaceChildren(out);
		note.textContent = [lines.length + " lines" + (needle ? ", " + n + " matching" : ""),
			dropped ? dropped + " older lines dropped (keeps " + V.MAXLINES + ")" : "",
			vm.truncated === true ? "the capture was cut to its limit" : ""].filter(Boolean).join(" \u00b7 ");
		if (atEnd) box.scrollTop = box.scrollHeight;
	}
	add(vm.lines);
	V.add(wrap, bar, box, note);
	draw();
	requestAnimationFrame(function () { box.scrollTop = box.scrollHeight; });
	return wrap;
};
V.logLine = function (l, text, needle, withTime) {
	var err = l.stream === "stderr", row = V.el("div", "ln" + (err ? " err" : ""));
	row.appendChild(V.el("span", "mk", err ? "err" : l.stream === "stdout" ? "out" : ""));
	if (withTime) {
		var t = V.time(l.time), ts = V.el("span", "ts", isFinite(t) ? V.fmtTime(t, "s") : "");
		row.appendChild(ts);
	}
	var tx = V.el("span", "tx");
	if (!needle || text.toLowerCase().length !== text.length) tx.textContent = text;
	else {
		var low = text.toLowerCase(), at = 0, i;
		while ((i = low.indexOf(needle, at)) >= 0) {
			tx.appendChild(document.createTextNode(text.slice(at, i)));
			tx.appendChild(V.el("mark", "", text.slice(i, i + needle.length)));
			at = i + needle.length;
		}
		tx.appendChild(document.createTextNode(text.slice(at)));
	}
	row.appendChild(tx);
	return row;
};
/* How many first lines of fresh repeat the end of old (a "since" may resend the boundary). */
V.overlap = function (old, fresh) {
	var same = function (a, b) { return a.text === b.text && a.time === b.time && a.stream === b.stream; };
	for (var k = Math.min(old.length, fresh.length, 200); k > 0; k--) {
		var ok = true;
		for (var j = 0; j < k && ok; j++) ok = same(old[old.length - k + j], fresh[j]);
		if (ok) return k;
	}
	return 0;
};
/* Follow: vm.follow (then each result's) every 2 s, at most 150 times, until pressed again or an error. */
V.followButton = function (vm, onLines) {
	var timer = null, left = 0, next = V.call(vm.follow), inFlight = false, b = V.button("Follow", function () {
		if (timer) return stop("Follow stopped.");
		left = 150;
		timer = setInterval(tick, 2000);
		b.setAttribute("aria-pressed", "true");
		b.textContent = "Following\u2026";
		V.status("Following: a new call every 2 s.", "");
		tick();
	});
	b.setAttribute("aria-pressed", "false");
	function stop(msg) {
		clearInterval(timer);
		timer = null;
		b.setAttribute("aria-pressed", "false");
		b.textContent = "Follow";
		if (msg) V.status(msg, "");
	}
	function tick() {
		if (inFlight) return;
		if (left-- <= 0) return stop("Follow stopped after 150 calls.");
		inFlight = true;
		V.bridge.callTool(next).then(function (res) {
			var nvm = V.vmOf(res);
			if (!timer) return;
			if (!nvm || res.isError || nvm.isError) {
				stop();
				V.status("Follow stopped: " + (V.firstLine(res) || V.txt(nvm && nvm.message, "no log lines in the result")), "err");
				return;
			}
			next = V.call(nvm.follow) || next;
			onLines(nvm.lines);
		}, function (e) { stop(); V.status("Follow stopped: " + V.msg(e), "err"); })
			.then(function () { inFlight = false; });
	}
	V.cleanups.push(function () { if (timer) stop(); });
	return b;
};
