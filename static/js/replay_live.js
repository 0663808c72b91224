/* Following a running attempt on its replay page (templates/replay/attempt.html, data-live-url on
 * #replay: only while the attempt is queued or running).
 *
 * A worker stores the trajectory as the agent records it (runs.evaluation.live). Every POLL_MS this
 * script asks data-live-url (JSON: status, whether it is still live, how many steps are stored,
 * which try) and, when there are new steps this page of the trajectory holds, fetches their
 * bodies from data-steps-url: the page's own fragment, rendered, escaped and gold-redacted by the
 * server exactly as the steps already shown. They are appended to the list and announced to
 * replay.js ("replay:steps-added") for its keys and search. Polling stops once the attempt has
 * ended, or another try of it has started (its steps replace these): the page then says so, with
 * a link to reload it.
 *
 * As replay.js: fetched bodies are moved in from an inert DOMParser document; nothing here uses
 * innerHTML or inline styles (the site's CSP).
 */
(function () {
  "use strict";

  var root = document.getElementById("replay");
  if (!root || !root.hasAttribute("data-live-url")) {
    return;
  }
  var POLL_MS = 2000;
  var liveUrl = root.getAttribute("data-live-url");
  var stepsUrl = root.getAttribute("data-steps-url");
  var tries = parseInt(root.getAttribute("data-live-tries"), 10);
  var list = document.getElementById("steps");
  var notice = document.getElementById("live-status");

  function intAttribute(name, fallback) {
    var value = parseInt(root.getAttribute(name), 10);
    return isNaN(value) ? fallback : value;
  }

  var pageSize = intAttribute("data-page-size", 0);
  var pageFirst = intAttribute("data-page-first", 1);
  // The last step this page of the trajectory may hold; later ones belong to the next pages.
  var pageEnd = pageSize > 0 ? pageFirst + pageSize - 1 : Infinity;
  var stored = intAttribute("data-step-count", 0);

  function lastShown() {
    var numbers = Array.prototype.map.call(list.querySelectorAll("li[data-step]"), function (step) {
      return parseInt(step.getAttribute("data-step"), 10);
    });
    return numbers.length ? Math.max.apply(null, numbers) : pageFirst - 1;
  }

  function say(text, link) {
    if (!notice) {
      return;
    }
    notice.textContent = text;
    if (link) {
      var anchor = document.createElement("a");
      anchor.href = window.location.pathname + window.location.search;
      anchor.textContent = link;
      notice.appendChild(document.createTextNode(" "));
      notice.appendChild(anchor);
      notice.appendChild(document.createTextNode("."));
    }
  }

  function append(html, first, last) {
    var fetched = new DOMParser().parseFromString(html, "text/html");
    var added = 0;
    Array.prototype.forEach.call(fetched.querySelectorAll("[data-body-of]"), function (body) {
      var number = parseInt(body.getAttribute("data-body-of"), 10);
      if (isNaN(number) || number < first || number > last || document.getElementById("step-" + number)) {
        return;
      }
      var step = document.createElement("li");
      step.className = "step step-live";
      step.id = "step-" + number;
      step.setAttribute("data-step", String(number));
      step.tabIndex = -1;
      if (body.hasAttribute("data-error")) {
        step.classList.add("step-error");
        step.setAttribute("data-error", "1");
      }
      while (body.firstChild) {
        step.appendChild(document.adoptNode(body.firstChild));
      }
      list.appendChild(step);
      added += 1;
    });
    if (added) {
      Array.prototype.forEach.call(list.querySelectorAll("li.empty"), function (empty) {
        empty.parentNode.removeChild(empty);
      });
      var problem = document.getElementById("trajectory-problem");
      if (problem) {
        problem.parentNode.removeChild(problem);
      }
      root.dispatchEvent(new CustomEvent("replay:steps-added"));
    }
    return added;
  }

  function getJson(url) {
    return window.fetch(url, { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      });
  }

  function getBodies(first, last) {
    return window.fetch(stepsUrl + "?first=" + first + "&last=" + last,
      { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      });
  }

  function poll() {
    getJson(liveUrl).then(function (state) {
      var shown = lastShown();
      if (state.tries !== tries && shown < pageFirst && !stored) {
        tries = state.tries; // nothing shown yet (a queued attempt that started): follow its try
      }
      if (state.tries !== tries || state.steps < Math.min(stored, pageEnd)) {
        // Another try started: its trajectory replaces the one on this page.
        say("A new try of this attempt has started.", "Reload the page to follow it");
        return null;
      }
      stored = Math.max(stored, state.steps);
      root.setAttribute("data-step-count", String(stored));
      var first = shown + 1;
      var last = Math.min(state.steps, pageEnd, shown + Math.max(pageSize, 1));
      var fetched = first <= last ? getBodies(first, last).then(function (html) { append(html, first, last); })
        : Promise.resolve();
      return fetched.then(function () {
        if (state.steps > pageEnd) {
          say("Steps " + (pageEnd + 1) + " to " + state.steps + " are on the next pages.");
        }
        if (!state.live) {
          say("The attempt has ended (" + state.status + ").", "Reload the page for its verdicts");
          return null;
        }
        return true;
      });
    }).catch(function () {
      return true; // a failed poll (the site restarting, a dropped connection): the next one tries again
    }).then(function (again) {
      if (again) {
        window.setTimeout(poll, POLL_MS);
      }
    });
  }

  window.setTimeout(poll, POLL_MS);
})();
