'use strict';
// The PIN page: posts the PIN as JSON (never in a URL) and reloads into the app.
(() => {
  const form = document.getElementById('login-form');
  const input = document.getElementById('pin');
  const button = document.getElementById('login-button');
  const error = document.getElementById('login-error');

  function show(message) {
    error.textContent = message;
    error.hidden = !message;
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    show('');
    button.disabled = true;
    try {
      const response = await fetch('/api/login', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ pin: input.value }),
        credentials: 'same-origin',
      });
      if (response.ok) {
        input.value = '';
        window.location.replace('/');
        return;
      }
      const body = await response.json().catch(() => ({}));
      if (response.status === 429) {
        show(body.error || 'Too many failed attempts; wait and try again.');
      } else {
        show(body.error === 'wrong PIN' ? 'Wrong PIN.' : (body.error || 'Sign-in failed.'));
      }
      input.select();
    } catch (err) {
      show('The server cannot be reached.');
    } finally {
      button.disabled = false;
    }
  });
})();
