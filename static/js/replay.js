/* Stepping through a trajectory (templates/replay/attempt.html and compare.html).
 *
 * The page is complete without this script; it adds:
 *  - keyboard navigation: j/n next step, k/p previous step (ArrowDown/ArrowUp once a step is
 *    selected), e first error, ] / [ next / previous error, / search, Esc clear the search;
 *    keys are left alone while typing in a field or with Ctrl/Alt/Meta held;
 *  - the current step highlighted, focused, scrolled into view and kept in the URL (#step-N);
 *  - search within the page: steps whose text does not contain the query are hidden, hits are
 *    marked and the collapsed parts holding them opened.
 *
 * A long trajectory is shown a page at a time (data-page-* on #replay). Stepping past the first or
 * last step of the page, stepping between errors (data-errors lists every error step of the
 * trajectory) and a #step-N link to a step of another page open the page that holds the step.
 *
 * On the attempt page (data-steps-url on #replay) only the first screen of a page's steps comes
 * with their bodies; the others are one line each (number, tool, error badge, summary) whose bodies
 * are fetched from data-steps-url (server-rendered, escaped HTML, at most a page of steps a
 * request) when they come near the viewport or are navigated to. Search looks at the loaded steps
 * itself and asks data-search-url (JSON: the matching step numbers of the whole trajectory) about
 * the others, then loads the matching ones.
 *
 * Steps hold text written by models and uploaders: this script only reads textContent, creates
 * elements with createElement/createTextNode, never innerHTML, and moves fetched bodies in from an
 * inert DOMParser document (nothing in it runs; the server escaped every piece of text in it).
 */
(function () {
  "use strict";

  var root = document.getElementById("replay");
  if (!root) {
    return;
  }
  var steps = Array.prototype.slice.call(root.querySelectorAll("[data-step]"));

  function intAttribute(name, fallback) {
    var value = parseInt(root.getAttribute(name), 10);
    return isNaN(value) ? fallback : value;
  }

  var total = intAttribute("data-step-count", steps.length);
  var pageSize = intAttribute("data-page-size", 0);
  var pageFirst = intAttribute("data-page-first", 1);
  var pageLast = intAttribute("data-page-last", steps.length);
  var pageUrl = root.getAttribute("data-page-url");
  // Every error step of the trajectory, on this page or another one, in order.
  var errorNumbers = root.hasAttribute("data-errors")
    ? root.getAttribute("data-errors").split(" ").filter(Boolean).map(function (n) { return parseInt(n, 10); })
    : steps.filter(function (step) { return step.hasAttribute("data-error"); }).map(stepNumber);
  var search = document.getElementById("replay-search");
  var status = document.getElementById("replay-status");
  var current = null;
  var texts = new Map(); // step -> its lowercased text, read once (the text never changes)
  var MAX_MARKS = 300; // hits marked per search: enough to see, bounded for a 500-step page
  var stepsUrl = root.getAttribute("data-steps-url");
  var searchUrl = root.getAttribute("data-search-url");
  var SEARCH_QUERY_CHARS = 200; // the server's bound (runs.replay.presenters.SEARCH_QUERY_CHARS)
  var loading = new Map(); // step number -> the promise of its body, while it is fetched
  var observer = null;

  root.classList.add("js-ready");

  function stepNumber(step) {
    return parseInt(step.getAttribute("data-step"), 10);
  }

  function announce(message) {
    if (status) {
      status.textContent = message;
    }
  }

  function select(step, options) {
    if (!step) {
      return;
    }
    var scroll = !options || options.scroll !== false;
    if (current && current !== step) {
      current.classList.remove("current");
      current.removeAttribute("aria-current");
    }
    current = step;
    step.classList.add("current");
    step.setAttribute("aria-current", "step");
    var hash = "#" + step.id;
    if (window.location.hash !== hash) {
      // replaceState: stepping through 500 steps must not fill the back button's history.
      window.history.replaceState(null, "", hash);
    }
    if (scroll) {
      step.scrollIntoView({ block: "start" });
    }
    if (!options || options.focus !== false) {
      step.focus({ preventScroll: true });
    }
    announce("Step " + stepNumber(step) + " of " + total + (step.hasAttribute("data-error") ? " (error)" : ""));
    if (isPending(step)) {
      // Its body is longer than its line: keep its top in view once the body is in.
      load([stepNumber(step)]).then(function () {
        if (current === step && scroll) {
          step.scrollIntoView({ block: "start" });
        }
      });
    }
  }

  function stepElement(number) {
    var step = document.getElementById("step-" + number);
    return step && root.contains(step) && step.hasAttribute("data-step") ? step : null;
  }

  // --- step bodies on demand --------------------------------------------------------------------

  function isPending(step) {
    return step.hasAttribute("data-pending");
  }

  function insertBodies(html) {
    var fetched = new DOMParser().parseFromString(html, "text/html");
    // Bodies are taller than lines: the selected step stays where it is on the screen however many
    // bodies above it come in (the browser's own scroll anchoring may pick a line being replaced).
    var anchor = current;
    var before = anchor ? anchor.getBoundingClientRect().top : 0;
    if (before < 0 || before > window.innerHeight) {
      anchor = null; // off screen: the reader is elsewhere
    }
    Array.prototype.forEach.call(fetched.querySelectorAll("[data-body-of]"), function (body) {
      var step = stepElement(parseInt(body.getAttribute("data-body-of"), 10));
      if (!step || !isPending(step)) {
        return;
      }
      while (step.firstChild) {
        step.removeChild(step.firstChild);
      }
      while (body.firstChild) {
        step.appendChild(document.adoptNode(body.firstChild));
      }
      step.removeAttribute("data-pending");
      step.classList.remove("step-pending", "loading");
      texts.delete(step);
      if (observer) {
        observer.unobserve(step);
      }
    });
    if (anchor) {
      var shift = anchor.getBoundingClientRect().top - before;
      if (shift) {
        window.scrollBy(0, shift);
      }
    }
  }

  // Load the bodies of these steps of the page that are still lines: one request from the first to
  // the last of them (a page's steps: within the server's bound). Resolves when they are in (or
  // could not be fetched: then they stay lines and load on the next try).
  function load(numbers) {
    var wanted = numbers.filter(function (n) {
      var step = stepElement(n);
      return step && isPending(step) && !loading.has(n);
    });
    if (wanted.length && stepsUrl) {
      var first = Math.min.apply(null, wanted);
      var last = Math.max.apply(null, wanted);
      var promise = window.fetch(stepsUrl + "?first=" + first + "&last=" + last,
        { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (!response.ok) {
            throw new Error("HTTP " + response.status);
          }
          return response.text();
        })
        .then(insertBodies)
        .catch(function () {
          announce("Steps " + first + " to " + last + " could not be loaded; try again");
        })
        .then(function () {
          wanted.forEach(function (n) {
            loading.delete(n);
            var step = stepElement(n);
            if (step) {
              step.classList.remove("loading");
            }
          });
        });
      wanted.forEach(function (n) {
        loading.set(n, promise);
        stepElement(n).classList.add("loading");
      });
    }
    return Promise.all(numbers.map(function (n) { return loading.get(n); }).filter(Boolean));
  }

  if (stepsUrl && "IntersectionObserver" in window) {
    var queued = [];
    var flush = null;
    observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.isIntersecting && isPending(entry.target)) {
          queued.push(stepNumber(entry.target));
        }
      });
      if (queued.length && flush === null) {
        // Steps that come into view together are fetched together.
        flush = window.setTimeout(function () {
          var numbers = queued;
          queued = [];
          flush = null;
          load(numbers);
        }, 50);
      }
    }, { rootMargin: "600px 0px" });
    steps.forEach(function (step) {
      if (isPending(step)) {
        observer.observe(step);
      }
    });
  }

  // Select step `number`: here if this page holds it, else by opening its page. False when no
  // page holds it.
  function goTo(number) {
    var step = stepElement(number);
    if (step) {
      if (step.hidden) {
        clearSearch();
      }
      select(step);
      return true;
    }
    if (pageUrl === null || pageSize < 1 || number < 1 || number > total) {
      return false;
    }
    announce("Opening the page that holds step " + number);
    window.location.assign(pageUrl + Math.ceil(number / pageSize) + "#step-" + number);
    return true;
  }

  function shown(step) {
    return !step.hidden;
  }

  // The next (delta 1) or previous (delta -1) shown step in `list` relative to the current one.
  function neighbour(list, delta) {
    var candidates = list.filter(shown);
    if (!candidates.length) {
      return null;
    }
    if (!current) {
      return delta > 0 ? candidates[0] : candidates[candidates.length - 1];
    }
    var here = stepNumber(current);
    if (delta > 0) {
      for (var i = 0; i < candidates.length; i++) {
        if (stepNumber(candidates[i]) > here) {
          return candidates[i];
        }
      }
    } else {
      for (var j = candidates.length - 1; j >= 0; j--) {
        if (stepNumber(candidates[j]) < here) {
          return candidates[j];
        }
      }
    }
    return null;
  }

  function move(delta) {
    var step = neighbour(steps, delta);
    if (step) {
      select(step);
      return;
    }
    // Past this page's steps: the neighbouring page, unless a search keeps us among its matches.
    var searching = search && search.value.trim();
    if (!searching && delta > 0 && pageLast < total && goTo(pageLast + 1)) {
      return;
    }
    if (!searching && delta < 0 && pageFirst > 1 && goTo(pageFirst - 1)) {
      return;
    }
    announce(delta > 0 ? "Already at the last step" : "Already at the first step");
  }

  function firstError() {
    if (!errorNumbers.length) {
      announce("No step is marked as an error");
      return;
    }
    goTo(errorNumbers[0]);
  }

  function nextError(delta) {
    if (!errorNumbers.length) {
      announce("No step is marked as an error");
      return;
    }
    // Without a selected step, from the edge of this page.
    var here = current ? stepNumber(current) : (delta > 0 ? pageFirst - 1 : pageLast + 1);
    var target = null;
    for (var i = 0; i < errorNumbers.length; i++) {
      var number = errorNumbers[delta > 0 ? i : errorNumbers.length - 1 - i];
      if (delta > 0 ? number > here : number < here) {
        target = number;
        break;
      }
    }
    if (target === null || !goTo(target)) {
      announce(delta > 0 ? "No error after this step" : "No error before this step");
    }
  }

  // --- search ---------------------------------------------------------------------------------

  function textOf(step) {
    var text = texts.get(step);
    if (text === undefined) {
      text = step.textContent.toLowerCase();
      texts.set(step, text);
    }
    return text;
  }

  function unmark() {
    var marks = root.querySelectorAll("mark.search-hit");
    Array.prototype.forEach.call(marks, function (mark) {
      var parent = mark.parentNode;
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    });
  }

  // Wrap up to `budget` occurrences of `query` inside `element` in <mark>; returns the budget left.
  function mark(element, query, budget) {
    var walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    var nodes = [];
    while (walker.nextNode()) {
      if (walker.currentNode.nodeValue.toLowerCase().indexOf(query) !== -1) {
        nodes.push(walker.currentNode);
      }
    }
    for (var i = 0; i < nodes.length && budget > 0; i++) {
      var node = nodes[i];
      var at;
      while (budget > 0 && (at = node.nodeValue.toLowerCase().indexOf(query)) !== -1) {
        var hit = node.splitText(at);
        node = hit.splitText(query.length);
        var wrapper = document.createElement("mark");
        wrapper.className = "search-hit";
        wrapper.textContent = hit.nodeValue;
        hit.parentNode.replaceChild(wrapper, hit);
        budget -= 1;
        var details = wrapper.parentNode.closest("details");
        while (details && element.contains(details)) {
          details.open = true;
          details = details.parentNode.closest("details");
        }
      }
    }
    return budget;
  }

  var searchRun = 0; // the latest search: an older one's answer arriving late is dropped
  var appliedRun = 0;
  var appliedQuery = "";

  function searchBusy() {
    return appliedRun !== searchRun;
  }

  // Search: the loaded steps here; the others (on this page and in the whole trajectory) on the
  // server, then the page's matching steps are loaded. Resolves when the steps are filtered.
  function applySearch() {
    if (!search) {
      return Promise.resolve();
    }
    var typed = search.value.trim();
    var query = typed.toLowerCase();
    var run = ++searchRun;
    var pendingHere = steps.filter(isPending);
    if (!query || !searchUrl || (!pendingHere.length && total <= steps.length)) {
      filter(query, null);
      return Promise.resolve();
    }
    announce("Searching…");
    // This page's steps not loaded yet are searched exactly on the server (a page of them at most).
    var range = pendingHere.length
      ? "&first=" + stepNumber(pendingHere[0]) + "&last=" + stepNumber(pendingHere[pendingHere.length - 1]) : "";
    var answer = typed.length > SEARCH_QUERY_CHARS ? Promise.resolve(null)
      : window.fetch(searchUrl + "?q=" + encodeURIComponent(typed) + range,
        { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) {
            throw new Error("HTTP " + response.status);
          }
          return response.json();
        })
        .catch(function () { return null; });
    return answer.then(function (found) {
      if (run !== searchRun) {
        return null;
      }
      var hits = new Set(found ? found.steps : []);
      // The server's matches, steps whose line matches, and every step when the server could not tell.
      var wanted = pendingHere.filter(function (step) {
        return !found || hits.has(stepNumber(step)) || textOf(step).indexOf(query) !== -1;
      }).map(stepNumber);
      return load(wanted).then(function () {
        if (run === searchRun) {
          filter(query, found);
        }
      });
    });
  }

  // Show the steps of the page whose text holds `query` (or that the server's answer `found` lists).
  function filter(query, found) {
    appliedQuery = query;
    appliedRun = searchRun;
    unmark();
    var matches = 0;
    var budget = MAX_MARKS;
    var hits = found ? new Set(found.steps) : null;
    steps.forEach(function (step) {
      var hit = !query || textOf(step).indexOf(query) !== -1 || (hits !== null && hits.has(stepNumber(step)));
      step.hidden = !hit;
      step.classList.toggle("match", Boolean(query) && hit);
      if (query && hit) {
        matches += 1;
        budget = mark(step, query, budget);
      }
    });
    root.classList.toggle("filtered", Boolean(query));
    if (query) {
      var message = matches + " of " + steps.length + (steps.length < total ? " steps on this page match" : " steps match");
      if (found && steps.length < total && found.indexed) {
        var elsewhere = found.steps.filter(function (n) { return n < pageFirst || n > pageLast; }).length;
        message += "; " + elsewhere + (found.truncated ? " or more" : "") + " on other pages of the trajectory";
      } else if (found && steps.length < total) {
        message += "; other pages not searched (this trajectory is not indexed yet)";
      }
      announce(message);
    } else {
      announce("");
    }
  }

  function clearSearch() {
    if (search && search.value) {
      search.value = "";
      applySearch();
    }
  }

  // New steps of a running attempt, appended by replay_live.js, join this page's steps.
  root.addEventListener("replay:steps-added", function () {
    steps = Array.prototype.slice.call(root.querySelectorAll("[data-step]"));
    total = intAttribute("data-step-count", steps.length);
    pageLast = steps.length ? Math.max(pageLast, stepNumber(steps[steps.length - 1])) : pageLast;
    steps.forEach(function (step) {
      var number = stepNumber(step);
      if (step.hasAttribute("data-error") && errorNumbers.indexOf(number) === -1) {
        errorNumbers.push(number);
      }
    });
    errorNumbers.sort(function (a, b) { return a - b; });
    if (search && search.value.trim()) {
      applySearch();
    }
  });

  var timer = null;
  if (search) {
    search.addEventListener("input", function () {
      window.clearTimeout(timer);
      timer = window.setTimeout(applySearch, 120);
    });
  }

  // --- keys, buttons, links -------------------------------------------------------------------

  function typing(target) {
    if (!target || target === document.body) {
      return false;
    }
    var tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    if (search && event.target === search) {
      if (event.key === "Escape") {
        window.clearTimeout(timer);
        search.value = "";
        applySearch();
        search.blur();
        if (current) {
          select(current);
        }
        event.preventDefault();
      } else if (event.key === "Enter") {
        window.clearTimeout(timer);
        var selectFirst = function () {
          var first = steps.filter(shown)[0];
          if (first) {
            select(first);
          }
        };
        if (search.value.trim().toLowerCase() === appliedQuery && !searchBusy()) {
          selectFirst(); // already searched: at once
        } else {
          applySearch().then(selectFirst);
        }
        event.preventDefault();
      }
      return;
    }
    if (typing(event.target)) {
      return;
    }
    var onStep = current !== null && document.activeElement === current;
    switch (event.key) {
      case "j":
      case "n":
        move(1);
        break;
      case "k":
      case "p":
        move(-1);
        break;
      case "ArrowDown":
        if (!onStep) {
          return; // plain scrolling until a step is selected
        }
        move(1);
        break;
      case "ArrowUp":
        if (!onStep) {
          return;
        }
        move(-1);
        break;
      case "e":
        firstError();
        break;
      case "]":
        nextError(1);
        break;
      case "[":
        nextError(-1);
        break;
      case "/":
        if (!search) {
          return;
        }
        search.focus();
        search.select();
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  root.addEventListener("click", function (event) {
    var control = event.target.closest("[data-action]");
    if (control && root.contains(control)) {
      var action = control.getAttribute("data-action");
      event.preventDefault();
      if (action === "next") {
        move(1);
      } else if (action === "prev") {
        move(-1);
      } else if (action === "first-error") {
        firstError();
      } else if (action === "next-error") {
        nextError(1);
      }
      return;
    }
    var own = event.target.closest("a.step-anchor") && event.target.closest("[data-step]");
    if (own) {
      // A step's own link: selected now (the hashchange that follows comes a moment later).
      select(own, { scroll: false });
      return;
    }
    if (event.target.closest("a, button, summary, input, label, select, textarea")) {
      return;
    }
    var step = event.target.closest("[data-step]");
    if (step && step !== current && !window.getSelection().toString()) {
      select(step, { scroll: false });
    }
  });

  function fromHash(options) {
    var match = /^#step-(\d+)$/.exec(window.location.hash);
    if (!match) {
      return;
    }
    var number = parseInt(match[1], 10);
    var step = stepElement(number);
    if (step) {
      if (step.hidden) {
        clearSearch();
      }
      select(step, options);
    } else if (pageUrl !== null && pageSize > 0 && number >= 1 && number <= total) {
      // A link to a step of another page (links made before the pages existed, too): its page,
      // in place of this one in the history.
      window.location.replace(pageUrl + Math.ceil(number / pageSize) + "#step-" + number);
    }
  }

  window.addEventListener("hashchange", function () {
    fromHash({ scroll: true });
  });
  fromHash({ scroll: true });
})();
