// What every page shares besides the broker panel: escaping text for HTML, and the light or dark
// room (the ◐ button; the system's preference until the trainer chooses, remembered after).
"use strict";

function esc(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}

(function theme() {
  const saved = localStorage.getItem("workshop-theme");
  const light = saved ? saved === "light" : matchMedia("(prefers-color-scheme: light)").matches;
  document.body.classList.toggle("light", light);
  const button = document.getElementById("theme");
  if (!button) return;
  button.addEventListener("click", () => {
    const now = document.body.classList.toggle("light");
    localStorage.setItem("workshop-theme", now ? "light" : "dark");
  });
})();
