// Polled fragments answer 304 Not Modified when nothing changed (jobs/web/fragment_etags.py). The browser
// normally answers htmx's request from its own cache then (a 200 with the kept body, morphed to no
// change); should a 304 reach htmx itself, it leaves the region as it is instead of swapping in the
// empty body (htmx 2 swaps every 2xx/3xx by default).
if (window.htmx) htmx.config.responseHandling.unshift({ code: "304", swap: false });

// Live log tails: after an HTMX refresh, stay at the bottom if the reader was there (follow the log),
// otherwise keep their scroll position so they can read earlier output.
document.addEventListener("htmx:beforeSwap", function (event) {
  var box = event.detail.target;
  if (!box.classList || !box.classList.contains("log-box")) return;
  box.dataset.atBottom = String(box.scrollHeight - box.scrollTop - box.clientHeight < 24);
  box.dataset.scrollTop = String(box.scrollTop);
});
document.addEventListener("htmx:afterSwap", function (event) {
  var box = event.detail.target;
  if (!box.classList || !box.classList.contains("log-box")) return;
  box.scrollTop = box.dataset.atBottom === "false" ? Number(box.dataset.scrollTop || 0) : box.scrollHeight;
});

// Job form: offer only the GPU types and counts the chosen partition has (the server
// checks anyway). Run on every piece of content htmx loads as well as on the page: the cluster select
// swaps in a new <main> whose partition select carries the other cluster's offers.
// Once per select (htmx also fires htmx:load for the first page): remembered here, not in the DOM, which
// htmx saves in its history, so that a page restored by Back gets its listeners again.
var portalGpuChoicesDone = new WeakSet();
function portalGpuChoices(root) {
  var partition = root.querySelector && root.querySelector("#id_partition");
  var gpuType = root.querySelector && root.querySelector("#id_gpu_type");
  var gpuCount = root.querySelector && root.querySelector("#id_gpu_count");
  if (!partition || !gpuType || !gpuCount || !partition.dataset.gpuTypes || portalGpuChoicesDone.has(partition)) return;
  portalGpuChoicesDone.add(partition);
  var offers = JSON.parse(partition.dataset.gpuTypes);
  function update() {
    var types = offers[partition.value] || {};
    Array.prototype.forEach.call(gpuType.options, function (o) { o.disabled = o.value !== "" && !(o.value in types); });
    if (gpuType.selectedOptions[0] && gpuType.selectedOptions[0].disabled) gpuType.value = "";
    var counts = gpuType.value ? (types[gpuType.value] || []) : [].concat.apply([], Object.values(types));
    Array.prototype.forEach.call(gpuCount.options, function (o) { o.disabled = o.value !== "0" && counts.indexOf(Number(o.value)) < 0; });
    if (gpuCount.selectedOptions[0] && gpuCount.selectedOptions[0].disabled) gpuCount.value = "0";
  }
  partition.addEventListener("change", update);
  gpuType.addEventListener("change", update);
  update();
}
document.addEventListener("DOMContentLoaded", function () { portalGpuChoices(document); });
document.addEventListener("htmx:load", function (event) { portalGpuChoices(event.detail.elt); });

// The job form's "Run as scavenger" (in the quota estimate, <button data-set-priority="scavenger">):
// chooses that class and turns requeue on (a scavenger job must be requeued when stopped); the
// change event asks for the estimate again.
document.addEventListener("click", function (event) {
  var button = event.target.closest && event.target.closest("button[data-set-priority]");
  var form = button && button.closest("form");
  var select = form && form.elements.priority;
  if (!select) return;
  select.value = button.getAttribute("data-set-priority");
  if (form.elements.requeue) form.elements.requeue.checked = true;
  select.dispatchEvent(new Event("change", { bubbles: true }));
});

// Copy buttons: <button data-copy="ID"> copies the text of element ID and says so.
document.addEventListener("click", function (event) {
  var button = event.target.closest && event.target.closest("button[data-copy]");
  if (!button) return;
  var source = document.getElementById(button.dataset.copy);
  if (!source) return;
  var text = source.textContent.trim();
  var done = function () { button.textContent = "Copied"; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, function () { select(source); });
  } else {
    select(source);
    try { if (document.execCommand("copy")) done(); } catch (e) { /* the text stays selected for Ctrl+C */ }
  }
  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
});

// Times: the server writes UTC with its zone (<time datetime=... data-local=...>); show them in the
// browser's own zone, naming it ("2026-12-01 07:22 CET"). Also after every HTMX swap.
function portalLocalText(moment, kind) {
  var options = kind === "time"
    ? { hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short" }
    : { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short" };
  var parts = new Intl.DateTimeFormat("en-CA", options).formatToParts(moment);
  var get = function (type) { var p = parts.find(function (x) { return x.type === type; }); return p ? p.value : ""; };
  return (kind === "time" ? "" : get("year") + "-" + get("month") + "-" + get("day") + " ") +
    get("hour") + ":" + get("minute") + " " + get("timeZoneName");
}
function portalLocalTimes(root) {
  (root || document).querySelectorAll("time[data-local]").forEach(function (node) {
    var moment = new Date(node.getAttribute("datetime"));
    if (isNaN(moment)) return;
    var text = portalLocalText(moment, node.dataset.local);
    if (node.textContent !== text) node.textContent = text;  // unchanged: left alone (a live region's text)
  });
}
document.addEventListener("DOMContentLoaded", function () { portalLocalTimes(document); });
// A poll that brings the same moment (in UTC, as the server writes it) leaves the <time> the browser
// already wrote in its own zone as it is: a morph to UTC and back would change the text of the polled
// region twice, and a live region (a banner's role=status or alert) would be read out again each poll.
if (window.Idiomorph && Idiomorph.defaults && Idiomorph.defaults.callbacks) {
  var portalBeforeMorph = Idiomorph.defaults.callbacks.beforeNodeMorphed;
  Idiomorph.defaults.callbacks.beforeNodeMorphed = function (oldNode, newNode) {
    if (oldNode.nodeType === 1 && newNode.nodeType === 1 && oldNode.matches("time[data-local]") &&
        newNode.matches("time[data-local]") && oldNode.getAttribute("datetime") === newNode.getAttribute("datetime") &&
        oldNode.dataset.local === newNode.dataset.local) return false;
    return portalBeforeMorph ? portalBeforeMorph(oldNode, newNode) : true;
  };
}

// The browser's zone, for the server to read typed times in (portal/dates.py viewer_zone, cookie
// portal_tz). A zone select (data-browser-zone) still on UTC in a form whose times are empty (a new
// announcement on the first page seen) is set to it, offered first if the list lacks it (an old name
// such as Asia/Calcutta, which the server offers too once the cookie names it); a form with times
// keeps the zone they are in.
(function () {
  var zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return; }
  if (!zone) return;
  document.cookie = "portal_tz=" + encodeURIComponent(zone) + "; path=/; max-age=31536000; SameSite=Lax";
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("select[data-browser-zone]").forEach(function (select) {
      var times = select.form ? select.form.querySelectorAll("input[type=datetime-local]") : [];
      var empty = Array.prototype.every.call(times, function (input) { return !input.value; });
      var offered = Array.prototype.some.call(select.options, function (o) { return o.value === zone; });
      if (select.value !== "UTC" || !empty) return;
      var utc = select.options[0];  // UTC, a direct child of the select (the others are in optgroups)
      if (!offered && utc && utc.parentNode === select) select.insertBefore(new Option(zone, zone), utc.nextSibling);
      else if (!offered) return;
      select.value = zone;
    });
  });
})();
document.addEventListener("htmx:afterSwap", function (event) { portalLocalTimes(event.target); });

// Ticking times (portal/formats.py ticking): the server writes only the moment, <time datetime=...
// data-tick=ago|since|left|in>, so a polled fragment's markup stays the same as time passes and an
// unchanged poll is answered 304 (jobs/web/fragment_etags.py). Here it is worded relative to now, as the
// server words durations (portal/formats.py duration, from_now): "2 min 05 s ago", a run time
// "1 h 05 min", "55 min left", "(in about 40 min)"; and kept up to date every second. The absolute time,
// in the browser's zone, stays in the title. Each carries aria-live="off": its ticks are not read out.
function portalDuration(seconds) {
  seconds = Math.max(0, Math.floor(seconds));
  var days = Math.floor(seconds / 86400), hours = Math.floor(seconds % 86400 / 3600);
  var minutes = Math.floor(seconds % 3600 / 60), secs = seconds % 60;
  var two = function (n) { return (n < 10 ? "0" : "") + n; };
  if (days) return days + " day" + (days !== 1 ? "s" : "") + (hours ? " " + hours + " h" : "");
  if (hours) return hours + " h" + (minutes ? " " + two(minutes) + " min" : "");
  if (minutes) return minutes + " min" + (secs ? " " + two(secs) + " s" : "");
  return secs + " s";
}
function portalFromNow(seconds) {
  if (seconds <= 60) return "any moment now";
  var minutes = Math.round(seconds / 60), hours = Math.round(seconds / 3600);
  if (minutes < 90) return "in about " + minutes + " min";
  if (hours < 48) return "in about " + hours + " h";
  return "in about " + Math.round(hours / 24) + " days";
}
function portalTicks(root) {
  var now = Date.now();
  (root || document).querySelectorAll("time[data-tick]").forEach(function (node) {
    var at = Date.parse(node.getAttribute("datetime"));
    if (isNaN(at)) return;
    var past = (now - at) / 1000, text;
    switch (node.dataset.tick) {
      case "ago": text = portalDuration(past) + " ago"; break;
      case "since": text = portalDuration(past); break;
      case "left": text = portalDuration(-past) + " left"; break;
      case "in": text = "(" + portalFromNow(-past) + ")"; break;
      default: return;
    }
    if (node.textContent !== text) node.textContent = text;
    var title = portalLocalText(new Date(at), "datetime");
    if (node.title !== title) node.title = title;
  });
}
document.addEventListener("DOMContentLoaded", function () {
  portalTicks(document);
  setInterval(function () { portalTicks(document); }, 1000);
});
["htmx:afterSwap", "htmx:load"].forEach(function (name) {
  document.addEventListener(name, function (event) { portalTicks(event.target); });
});
// "Checked 3 s ago" beside a polled region (data-checks="<its id>"): each answer, 200 or 304 (the
// figures are still those shown), is a check.
document.addEventListener("htmx:afterRequest", function (event) {
  var region = event.detail.target, xhr = event.detail.xhr;
  if (!region || !region.id || !xhr || (xhr.status !== 200 && xhr.status !== 304)) return;
  document.querySelectorAll('[data-checks="' + region.id + '"] time[data-tick]').forEach(function (node) {
    node.setAttribute("datetime", new Date().toISOString().replace(/\.\d+Z$/, "Z"));
    portalTicks(node.parentNode);
  });
});

// Fragments that refresh themselves stop after the portal refuses one of their requests (401/403:
// the sign-in ended or changed, or the page is out of date), and the page says so once, instead of
// asking again every few seconds without a word. A session that ended is handled by the server
// (HX-Redirect to sign-in, back to this page afterwards); this is what is left.
var portalRefreshStopped = false;
document.addEventListener("htmx:beforeRequest", function (event) {
  if (portalRefreshStopped) event.preventDefault();
});
document.addEventListener("htmx:responseError", function (event) {
  var status = event.detail.xhr ? event.detail.xhr.status : 0;
  if ((status !== 401 && status !== 403) || portalRefreshStopped) return;
  portalRefreshStopped = true;
  var main = document.querySelector("main");
  if (!main) return;
  var note = document.createElement("p");
  note.className = "banner warn";
  note.setAttribute("data-testid", "refresh-stopped");
  note.setAttribute("role", "alert");
  note.textContent = "This page stopped refreshing: the portal refused a request from it (your sign-in may have " +
    "ended or changed, or the page is out of date). Reload the page to see where you stand.";
  main.insertBefore(note, main.firstChild);
});

// Regions that refresh themselves are polite live regions (aria-live="polite", aria-atomic="false") and
// are morphed (hx-swap="morph:innerHTML", idiomorph): only what changed is replaced, so a screen reader
// hears the change, not the whole region every few seconds, and a focused link or button keeps its
// focus. While a swap is under way the region is aria-busy, so the change is read once it is complete.
document.addEventListener("htmx:beforeSwap", function (event) {
  var region = event.detail.target;
  if (region && region.getAttribute && region.getAttribute("aria-live") && event.detail.shouldSwap) {
    region.setAttribute("aria-busy", "true");
  }
});
["htmx:afterSettle", "htmx:afterRequest"].forEach(function (name) {
  document.addEventListener(name, function (event) {
    var region = event.detail.target || event.target;
    if (region && region.removeAttribute && region.getAttribute("aria-busy")) region.removeAttribute("aria-busy");
  });
});

// On a narrow screen a wide table scrolls sideways inside the page (portal.css); one with no link or
// button of its own gets a Tab stop so it can be scrolled from the keyboard, and loses it once it fits.
function portalScrollers(root) {
  (root || document).querySelectorAll("table").forEach(function (table) {
    var scrolls = table.scrollWidth > table.clientWidth + 1;
    var ours = table.hasAttribute("data-scroll-stop");
    if (scrolls && !ours && !table.querySelector("a[href], button, input, select, textarea, [tabindex]")) {
      table.setAttribute("tabindex", "0");
      table.setAttribute("data-scroll-stop", "");
    } else if (!scrolls && ours) {
      table.removeAttribute("tabindex");
      table.removeAttribute("data-scroll-stop");
    }
  });
}
document.addEventListener("DOMContentLoaded", function () { portalScrollers(document); });
document.addEventListener("htmx:afterSettle", function (event) { portalScrollers(event.target); });
var portalResizeTimer = null;
window.addEventListener("resize", function () {
  clearTimeout(portalResizeTimer);
  portalResizeTimer = setTimeout(function () { portalScrollers(document); }, 150);
});
// The Tab stop above stays through a morph of its region (the server's HTML does not have it).
if (window.Idiomorph) {
  Idiomorph.defaults.callbacks.beforeAttributeUpdated = function (name, node, type) {
    return !(type === "remove" && (name === "tabindex" || name === "data-scroll-stop") && node.hasAttribute("data-scroll-stop"));
  };
}
