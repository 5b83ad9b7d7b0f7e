// The login form: POST /api/auth/login sets the session cookie; then on to `next`.
const form = document.getElementById("login-form");
const error = document.getElementById("login-error");

form?.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.hidden = true;
  const username = form.username.value.trim();
  const password = form.password.value;
  if (!username || !password) {
    error.textContent = "Enter your username and password.";
    error.hidden = false;
    return;
  }
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  try {
    const response = await fetch("/api/auth/login", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ username, password }),
    });
    if (response.ok) {
      const next = form.dataset.next || "/";
      location.assign(next.startsWith("/") && !next.startsWith("//") ? next : "/");
      return;
    }
    const body = await response.json().catch(() => ({}));
    error.textContent = response.status === 429
      ? "Too many attempts; wait a few minutes and try again."
      : body.error || "Login failed.";
    error.hidden = false;
  } catch {
    error.textContent = "The server cannot be reached.";
    error.hidden = false;
  } finally {
    button.disabled = false;
  }
});
