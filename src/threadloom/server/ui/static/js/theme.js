// Light and dark schemes: follow the system unless the visitor chose one (kept in
// localStorage); and the log-out button of the top bar.
const KEY = "threadloom-theme";
const ORDER = ["system", "light", "dark"];
const LABEL = { system: "follow the system", light: "light", dark: "dark" };
const ICON = { system: "◐", light: "☀", dark: "☾" };

function apply(choice) {
  if (choice === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = choice;
  const button = document.getElementById("theme-toggle");
  if (button) {
    button.textContent = ICON[choice];
    button.setAttribute("aria-label", `Colour scheme: ${LABEL[choice]}`);
    button.title = `Colour scheme: ${LABEL[choice]}`;
  }
}

let choice = localStorage.getItem(KEY) || "system";
if (!ORDER.includes(choice)) choice = "system";
apply(choice);

document.getElementById("theme-toggle")?.addEventListener("click", () => {
  choice = ORDER[(ORDER.indexOf(choice) + 1) % ORDER.length];
  localStorage.setItem(KEY, choice);
  apply(choice);
});

document.getElementById("logout")?.addEventListener("click", async () => {
  await fetch("/api/auth/logout", { method: "POST", credentials: "same-origin" });
  location.assign("/login");
});
