// ephemail web pages: the entry module of the home page, the inbox and the email view. Plain
// browser ES modules served as they are (no build step; src/web/assets.ts names them by content
// hash). Mail content is only ever put in the DOM as text (textContent), never as markup; the HTML
// body lives in a sandboxed frame of its own. Every request is to /api/v1 (api.js).
import { createInbox } from './api.js';
import { emailView } from './email.js';
import { inboxView } from './list.js';
import { $, createClock, createToast, inboxPath } from './ui.js';

function homeView() {
  const button = $('#create');
  const error = $('#create-error');
  button.addEventListener('click', async () => {
    button.disabled = true;
    error.hidden = true;
    try {
      location.assign(inboxPath((await createInbox()).address));
    } catch (err) {
      error.textContent = err instanceof Error ? err.message : String(err);
      error.hidden = false;
      button.disabled = false;
    }
  });
}

const toast = createToast($('#toast'));
const clock = createClock();
const page = document.body.dataset.page;
if (page === 'home') homeView();
else if (page === 'inbox') inboxView({ toast, clock });
else if (page === 'email') emailView({ toast });
clock.tick();
setInterval(clock.tick, 1000);
