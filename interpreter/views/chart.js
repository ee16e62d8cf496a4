V.chartView = function (vm) { return V.el("p", "note", "chart"); };
