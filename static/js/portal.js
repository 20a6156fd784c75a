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
