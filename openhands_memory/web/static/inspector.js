// Keyboard navigation: j / k follow the page's next / previous link, / focuses the search.
// The pages work without this script; it only adds the keys and the call box's jump.
(function () {
  "use strict";
  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var link = null;
    if (event.key === "j") link = document.querySelector("a[rel=next]");
    else if (event.key === "k") link = document.querySelector("a[rel=prev]");
    else if (event.key === "/") {
      var box = document.querySelector("header .search input[type=search]");
      if (box) { event.preventDefault(); box.focus(); }
      return;
    }
    if (link) { event.preventDefault(); window.location.assign(link.href); }
  });
  // "go to call N": without this script the form's GET is redirected by the server.
  document.querySelectorAll("form[data-goto]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      var n = form.querySelector("input[name=n]").value;
      if (n) { event.preventDefault(); window.location.assign(form.getAttribute("action") + encodeURIComponent(n)); }
    });
  });
})();
