// toolnexus inbox: live updates of the waiting list (server-sent events), nothing else.
// The server renders and escapes every row; this script only swaps the rows in.
(function () {
  "use strict";
  var body = document.body;
  if (!body.classList.contains("list") || !window.EventSource) { return; }
  var rows = document.getElementById("rows");
  var live = document.getElementById("live");
  var busy = false, again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(body.dataset.rows, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.text(); })
      .then(function (html) {
        var before = rows.querySelectorAll("tr[data-id]").length;
        rows.innerHTML = html;  // server-rendered, every value escaped there
        var after = rows.querySelectorAll("tr[data-id]").length;
        live.textContent = after > before ? (after - before) + " new request(s) waiting" :
          (after < before ? "A request was answered" : "Updated");
      })
      .catch(function () { live.textContent = "Could not refresh; reload the page."; })
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }

  var events = new EventSource(body.dataset.events);
  events.addEventListener("changed", refresh);
  events.onopen = function () { body.dataset.live = "on"; };
})();
