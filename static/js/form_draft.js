// What was typed in a form marked data-draft survives a reload of its page, and a Back to it from the
// page its Submit led to. Pressing Submit and then reloading while the answer is still on its way (a
// slow sbatch, a cluster under load) reloads the page as a GET answers it: an empty form, which
// Chromium does not fill in again. And Back from the new job's page loads the form again with a new
// submission key, so the same form sent again would make a second job. So at Submit the form's
// fields, the job script and the submission key among them, are kept in sessionStorage (this tab
// only, gone when it closes; docs/user-guide.md tells users so). Within DRAFT_MAX_AGE_MS, a reload of
// that form's page, or a Back to it from the one page after the Submit, puts them back, the key
// included, and shows the form's note that the first Submit may have gone through (My jobs shows it;
// the same form sent again unchanged shows that job rather than making a second); so does a reload of
// the form so restored, or a Forward and a Back again. The page after the Submit keeps them for that
// Back, also when it is reloaded; every other page load forgets them: a plain visit, any other page
// after that one, a form the server sent back with what was typed (data-bound="1": a refusal), or one
// for another cluster than the draft's (the address bar names the cluster, jobs/web/forms.py reloaded,
// so a reload keeps it). The CSRF token and files are never kept.
// A Submit that lands on the sign-in page (data-draft-signin: the portal session had ended, so the form
// was not sent) shows that page's note that the form will be filled in again, and the draft is then kept
// by every page without such a form for SIGNIN_MAX_AGE_MS: the first arrival at that form's page, signed
// in as the same person (base.html's current-user), unbound, puts it back, however it was reached
// (sign-in's next, a link); from there it is kept like a draft restored by a reload. The note is said
// again only on a reload of that sign-in address. Another person signing in on the tab, or a sign-out,
// forgets the draft on the first page they reach.
(function () {
  var KEY = "portal:form-draft";
  var DRAFT_MAX_AGE_MS = 30 * 60 * 1000;
  var SIGNIN_MAX_AGE_MS = 8 * 60 * 60 * 1000;  // signing in again may wait for a meeting, or lunch

  function storage() {
    try { return window.sessionStorage; } catch (e) { return null; }  // blocked: no draft, no harm
  }

  function fields(form) {
    return Array.prototype.filter.call(form.elements, function (el) {
      return el.name && el.name !== "csrfmiddlewaretoken" && !el.disabled &&
        ["submit", "button", "reset", "file", "password"].indexOf(el.type) < 0;
    });
  }

  function who() {  // the signed-in person's username, "" on a page for nobody signed in
    var el = document.querySelector("[data-testid=current-user] code");
    return el ? el.textContent.trim() : "";
  }

  function keep(store, draft) {
    try { store.setItem(KEY, JSON.stringify(draft)); } catch (e) { store.removeItem(KEY); }
  }

  function save(form) {
    var store = storage();
    if (!store) return;
    var values = fields(form).map(function (el) {
      return { name: el.name, type: el.type, value: el.value, checked: !!el.checked };
    });
    var draft = { form: form.dataset.draft, path: location.pathname, at: Date.now(), who: who(), values: values };
    try {
      store.setItem(KEY, JSON.stringify(draft));
    } catch (e) { /* full or blocked: the form is sent all the same */ }
  }

  function atSignIn(store, draft, note) {  // the Submit that led here was not sent: say it will come back
    draft.signin = true;
    draft.left = location.pathname;
    draft.landed = location.href;  // the note is said again only on this address (a reload of it)
    keep(store, draft);
    Array.prototype.forEach.call(document.querySelectorAll("[data-session-note]"), function (el) { el.hidden = true; });
    note.hidden = false;
  }

  function navigation() {  // "navigate", "reload" or "back_forward"
    var nav = performance.getEntriesByType && performance.getEntriesByType("navigation")[0];
    return nav ? nav.type : "";
  }

  function restore(form, draft) {
    draft.values.forEach(function (saved) {
      fields(form).forEach(function (el) {
        if (el.name !== saved.name) return;
        if (el.type === "checkbox" || el.type === "radio") { if (el.value === saved.value) el.checked = saved.checked; }
        else if (el.value !== saved.value) el.value = saved.value;
      });
    });
    var note = document.querySelector("[data-draft-note]");  // the form's note, hidden until now
    if (note) note.hidden = false;
    // portal.js's GPU choices and the form's quota estimate follow the restored partition and GPUs
    if (form.elements.partition) form.elements.partition.dispatchEvent(new Event("change", { bubbles: true }));
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form && form.dataset && form.dataset.draft) save(form);
  }, true);

  document.addEventListener("DOMContentLoaded", function () {
    var store = storage();
    if (!store) return;
    var form = document.querySelector("form[data-draft]");
    var draft = null;
    try { draft = JSON.parse(store.getItem(KEY) || "null"); } catch (e) { draft = null; }
    var fresh = !!draft && Array.isArray(draft.values) &&
      Date.now() - draft.at <= (draft.signin ? SIGNIN_MAX_AGE_MS : DRAFT_MAX_AGE_MS);
    if (!form) {  // the page the Submit led to keeps the draft for a Back to the form (draft.left), reloaded or not
      var note = document.querySelector("[data-draft-signin]");
      var someoneElse = fresh && draft.signin && who() && who() !== draft.who;
      if (someoneElse || document.querySelector("[data-testid=signed-out]")) {
        store.removeItem(KEY);  // another person signed in on this tab, or its person signed out: forget it
        return;
      }
      if (fresh && note && (!draft.left || (draft.signin && draft.landed === location.href))) atSignIn(store, draft, note);
      else if (fresh && draft.signin) return;  // on the way back from sign-in to the form
      else if (fresh && !draft.left) {
        draft.left = location.pathname;
        keep(store, draft);
      } else if (!fresh || draft.left !== location.pathname) store.removeItem(KEY);
      return;
    }
    var cluster = form.elements.cluster ? form.elements.cluster.value : "";
    var saved = fresh ? draft.values.filter(function (v) { return v.name === "cluster"; })[0] : null;
    var same = fresh && draft.form === form.dataset.draft && draft.path === location.pathname &&
      form.dataset.bound !== "1" && (!saved || saved.value === cluster);
    var how = navigation();
    if (same && draft.signin && draft.who && draft.who === who()) {  // back after signing in again
      restore(form, draft);
      delete draft.signin;
      draft.at = Date.now();  // from here, a draft restored like by a reload
      keep(store, draft);
    } else if (same && !draft.signin && (how === "reload" || (draft.left && how === "back_forward"))) restore(form, draft);
    else store.removeItem(KEY);
  });
})();
