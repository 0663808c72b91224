// Reloads the page every data-seconds seconds (#auto-refresh, templates/runs/_auto_refresh.html)
// unless the reader unticks "keep refreshing"; the choice lasts for this tab (sessionStorage), so a
// reader who stopped it is not surprised by the next page that refreshes.
(function () {
  "use strict";
  const note = document.getElementById("auto-refresh");
  const box = document.getElementById("auto-refresh-on");
  if (!note || !box) return;
  const seconds = Number(note.dataset.seconds) || 10;
  const KEY = "autoexperiment.autoRefreshOff";
  let timer = null;

  function schedule() {
    clearTimeout(timer);
    timer = box.checked ? setTimeout(() => window.location.reload(), seconds * 1000) : null;
  }

  box.checked = sessionStorage.getItem(KEY) !== "1";
  box.addEventListener("change", () => {
    if (box.checked) sessionStorage.removeItem(KEY); else sessionStorage.setItem(KEY, "1");
    schedule();
  });
  box.closest("label").hidden = false;
  schedule();
})();
