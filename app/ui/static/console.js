// The console's one script: `/` focuses the search box (as on most sites), Escape leaves it.
// Served from this package under a CSP that allows no inline script.
"use strict";
document.addEventListener("keydown", (event) => {
  const target = event.target;
  const typing = target instanceof HTMLElement &&
    (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
  if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
    const boxes = document.querySelectorAll("[data-slash-focus]");
    const box = boxes[boxes.length - 1];
    if (box) {
      event.preventDefault();
      box.focus();
      box.select();
    }
  } else if (event.key === "Escape" && typing && target.matches("[data-slash-focus]")) {
    target.blur();
  }
});

// The one-time sign-in link's page (/ui/login?code=...) posts its form at once: the
// code is used by that POST, never by the GET a link preview might make.
for (const form of document.querySelectorAll("form[data-autosubmit]")) {
  form.requestSubmit();
}
