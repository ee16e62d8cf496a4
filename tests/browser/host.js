// The test host's page: it holds one view in a sandboxed iframe (scripts only: an opaque
// origin, never the host's) and relays JSON-RPC messages between the view and Python.
// Messages from the view go to Python through the `hostRelay` binding (added by the driver);
// Python answers and notifies through window.hostSend. Nothing here interprets a message.
"use strict";
(function () {
  let frame = null;

  window.hostLoad = function (html, width, sandbox, dark) {
    const stage = document.getElementById("stage");
    stage.textContent = "";
    document.body.classList.toggle("dark", Boolean(dark));
    frame = document.createElement("iframe");
    frame.setAttribute("sandbox", sandbox);
    frame.setAttribute("title", "view");
    frame.style.width = width + "px";
    frame.srcdoc = html;
    stage.appendChild(frame);
    return true;
  };

  window.hostSend = function (message) {
    if (frame && frame.contentWindow) {
      frame.contentWindow.postMessage(message, "*");
      return true;
    }
    return false;
  };

  window.hostResize = function (height) {
    if (frame) frame.style.height = Math.max(40, Math.ceil(height)) + "px";
    return true;
  };

  window.addEventListener("message", function (event) {
    if (!frame || event.source !== frame.contentWindow) return;
    let text;
    try {
      text = JSON.stringify(event.data);
    } catch (err) {
      text = JSON.stringify({unserialisable: String(err)});
    }
    window.hostRelay(text);
  });
})();
