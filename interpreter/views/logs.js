V.logsView = function (vm) { return V.el("p", "note", "logs"); };
