// Live pages: every three seconds, fetch this page again and swap in its [data-live] part (the
// server renders it from the shared store, so any replica answers). Paused while hidden.
(function () {
  "use strict";
  var part = document.querySelector("[data-live]");
  if (!part) { return; }
  var every = 3000;
  function refresh() {
    if (document.hidden) { return; }
    fetch(window.location.href, { headers: { "X-Console-Live": "1" }, credentials: "same-origin" })
      .then(function (response) {
        if (response.status === 401) { window.location.reload(); return null; }
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-live]");
        if (fresh) { part.replaceChildren.apply(part, Array.from(fresh.childNodes)); }
        part.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* the next tick tries again */ });
  }
  window.setInterval(refresh, every);
})();
