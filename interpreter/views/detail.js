V.detailView = function (vm) { return V.el("p", "note", "detail"); };
