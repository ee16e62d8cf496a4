/* detail.js: label/value pairs, then each section as a table with its row actions. */
V.detailView = function (vm, st) {
	var box = V.el("div"), dl = V.el("dl");
	V.arr(vm.fields).filter(V.obj).slice(0, 200).forEach(function (f) {
		V.add(dl, V.el("dt", "v", V.clip(V.txt(f.label, "\u2014"), 100)), V.add(V.el("dd"), V.cell(f.value, f, 1)));
	});
	if (dl.firstChild) box.appendChild(dl);
	st.sec = st.sec || [];
	V.arr(vm.sections).filter(V.obj).slice(0, 20).forEach(function (s, i) {
		var title = V.clip(V.txt(s.title, "Section"), 200);
		box.appendChild(V.el("h2", "v", title));
		box.appendChild(V.table(s, { state: st.sec[i] || (st.sec[i] = {}), title: title }));
	});
	return box;
};
