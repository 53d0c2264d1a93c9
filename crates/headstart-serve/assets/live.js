// headstart serve: keeps a session page current. The server sends the page's parts, already rendered and escaped,
// as server-sent events; this replaces them, keeping open what the reader opened. No framework, no build step.
(function () {
  "use strict";
  var root = document.getElementById("session");
  if (!root || !window.EventSource) {
    return;
  }
  var live = document.getElementById("live");
  var events = new EventSource(root.getAttribute("data-events"));
  events.onopen = function () {
    live.textContent = "live";
    live.className = "on";
  };
  events.onerror = function () {
    live.textContent = "reconnecting…";
    live.className = "off";
  };
  events.addEventListener("update", function (event) {
    var update = JSON.parse(event.data);
    var open = [];
    document.querySelectorAll("details[open][data-key]").forEach(function (details) {
      open.push(details.getAttribute("data-key"));
    });
    document.getElementById("status").innerHTML = update.status;
    document.getElementById("transcript").innerHTML = update.transcript;
    document.getElementById("timeline").innerHTML = update.timeline;
    document.querySelectorAll("details[data-key]").forEach(function (details) {
      if (open.indexOf(details.getAttribute("data-key")) >= 0) {
        details.open = true;
      }
    });
    root.setAttribute("data-updates", String(Number(root.getAttribute("data-updates") || "0") + 1));
  });
})();
