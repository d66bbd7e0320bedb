// The fleetset console's progressive enhancement. Every form works without it; with it:
// list items are added, removed and reordered in place, settings are saved without a reload
// and the server's errors land next to their fields, live pages redraw on the server's
// events, and new tokens get a copy button. No dependencies; served with the page's policy.
'use strict';

(function () {
  /** The element id the server gives the field of a JSON pointer (SettingsForm.fieldID). */
  function fieldID(pointer) {
    let id = 'f';
    for (const character of pointer) {
      if (/^[A-Za-z0-9_]$/.test(character)) {
        id += character;
      } else {
        id += '-' + character.codePointAt(0).toString(16) + '-';
      }
    }
    return id;
  }

  function announce(form, text) {
    const status = form.querySelector('.form-status');
    if (status) status.textContent = text;
  }

  // MARK: - Lists

  let nextNewRow = 1000;

  function rowTools(list, row) {
    if (row.querySelector('.row-tools')) return;
    const remove = row.querySelector('label.remove');
    if (remove) remove.hidden = true;
    const tools = document.createElement('div');
    tools.className = 'row-tools';
    for (const [action, text] of [['up', 'Move up'], ['down', 'Move down'], ['remove', 'Remove']]) {
      const button = document.createElement('button');
      button.type = 'button';
      button.dataset.rowAction = action;
      button.textContent = text;
      tools.append(button);
    }
    row.append(tools);
  }

  function enhanceList(list) {
    if (list.dataset.enhanced) return;
    list.dataset.enhanced = 'yes';
    const items = list.querySelector('ol.list-items');
    const template = list.querySelector('template.list-new-row');
    if (!items || !template) return;
    for (const row of items.children) rowTools(list, row);
    const add = document.createElement('button');
    add.type = 'button';
    add.className = 'add-item';
    add.textContent = 'Add item';
    items.after(add);
    add.addEventListener('click', () => {
      const index = String(nextNewRow++);
      const html = template.innerHTML.split('__N__').join(index);
      const holder = document.createElement('ol');
      holder.innerHTML = html;
      const row = holder.firstElementChild;
      items.append(row);
      rowTools(list, row);
      const first = row.querySelector('input:not([type="hidden"]), select, textarea');
      if (first) first.focus();
    });
    list.addEventListener('click', (event) => {
      const button = event.target.closest('button[data-row-action]');
      if (!button) return;
      const row = button.closest('li.list-item');
      const action = button.dataset.rowAction;
      if (action === 'remove') {
        const next = row.nextElementSibling || row.previousElementSibling;
        row.remove();
        (next ? next.querySelector('button[data-row-action="remove"]') : add).focus();
      } else if (action === 'up' && row.previousElementSibling) {
        row.previousElementSibling.before(row);
        button.focus();
      } else if (action === 'down' && row.nextElementSibling) {
        row.nextElementSibling.after(row);
        button.focus();
      }
    });
  }

  /** Numbers each list's rows 0, 1, 2… in the order shown, in every name and pointer. */
  function renumber(form) {
    for (const list of form.querySelectorAll('fieldset[data-list]')) {
      const pointer = list.dataset.list;
      const rows = list.querySelectorAll(':scope > ol.list-items > li.list-item');
      rows.forEach((row, index) => {
        const before = pointer + '/' + row.dataset.row;
        const after = pointer + '/' + index;
        if (before === after) return;
        for (const element of [row, ...row.querySelectorAll('*')]) {
          for (const attribute of ['name', 'data-pointer']) {
            const value = element.getAttribute(attribute);
            if (value === null) continue;
            const colon = attribute === 'name' ? value.indexOf(':') + 1 : 0;
            const path = value.slice(colon);
            if (path === before || path.startsWith(before + '/')) {
              element.setAttribute(attribute, value.slice(0, colon) + after + path.slice(before.length));
            }
          }
          for (const attribute of ['id', 'for', 'aria-describedby']) {
            const value = element.getAttribute(attribute);
            if (value !== null) element.setAttribute(attribute, value.split(fieldID(before)).join(fieldID(after)));
          }
        }
        row.dataset.row = String(index);
      });
    }
  }

  // MARK: - Saving settings

  function clearErrors(form) {
    for (const field of form.querySelectorAll('[data-pointer]')) {
      field.classList.remove('invalid');
      const error = field.querySelector(':scope > .field-error');
      if (error) {
        error.textContent = '';
        error.hidden = true;
      }
      for (const control of field.querySelectorAll(':scope > input, :scope > select, :scope > textarea')) {
        control.removeAttribute('aria-invalid');
      }
    }
    const summary = form.querySelector('.error-summary');
    if (summary) summary.hidden = true;
  }

  /** The field whose pointer is the longest prefix of `pointer`. */
  function fieldFor(form, pointer) {
    let best = null;
    for (const field of form.querySelectorAll('[data-pointer]')) {
      const own = field.dataset.pointer;
      if ((pointer === own || pointer.startsWith(own + '/')) && (!best || own.length > best.dataset.pointer.length)) best = field;
    }
    return best;
  }

  function showErrors(form, errors) {
    const summary = form.querySelector('.error-summary');
    const list = summary.querySelector('ul');
    list.replaceChildren();
    let first = null;
    for (const { pointer, message } of errors) {
      const field = pointer ? fieldFor(form, pointer) : null;
      const item = document.createElement('li');
      if (field) {
        field.classList.add('invalid');
        const error = field.querySelector(':scope > .field-error');
        if (error) {
          error.textContent = error.textContent ? error.textContent + '; ' + message : message;
          error.hidden = false;
        }
        const control = field.querySelector(':scope > input:not([type="hidden"]), :scope > select, :scope > textarea');
        if (control) {
          control.setAttribute('aria-invalid', 'true');
          first = first || control;
        }
        const link = document.createElement('a');
        link.href = '#' + (control ? control.id : '');
        link.textContent = pointer;
        item.append(link, ': ' + message);
      } else {
        item.textContent = (pointer ? pointer + ': ' : '') + message;
      }
      list.append(item);
    }
    summary.hidden = false;
    summary.focus();
    return first;
  }

  function enhanceSettingsForm(form) {
    if (form.dataset.enhanced) return;
    form.dataset.enhanced = 'yes';
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      renumber(form);
      clearErrors(form);
      announce(form, 'Saving…');
      let answer;
      try {
        const response = await fetch(form.action, {
          method: 'POST',
          credentials: 'same-origin',
          headers: { Accept: 'application/json', 'Content-Type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams(new FormData(form)),
        });
        answer = await response.json();
      } catch (error) {
        announce(form, 'Not saved: the server did not answer (' + error.message + ').');
        return;
      }
      if (answer.saved) {
        const next = new URL(location.href);
        next.searchParams.set('saved', '1');
        location.assign(next);
        return;
      }
      announce(form, 'Not saved.');
      for (const notice of document.querySelectorAll('main > .notice')) notice.remove();
      showErrors(form, answer.errors || []);
    });
  }

  // MARK: - Live pages

  /**
   * Redraws on the server's events: at most one redraw every half second however many events
   * arrive (a fleet reporting at once sends thousands), and always one after the last event.
   */
  function follow() {
    if (!document.body.hasAttribute('data-live') || !window.EventSource) return;
    let scheduled = false;
    let running = false;
    let again = false;
    const schedule = () => {
      if (scheduled) return;
      scheduled = true;
      setTimeout(async () => {
        scheduled = false;
        if (running) {
          again = true;
          return;
        }
        running = true;
        try {
          await redraw();
        } finally {
          running = false;
          if (again) {
            again = false;
            schedule();
          }
        }
      }, 500);
    };
    const source = new EventSource('/console/events');
    source.addEventListener('change', schedule);
  }

  async function redraw() {
    const response = await fetch(location.href, { credentials: 'same-origin' });
    if (!response.ok || !response.headers.get('Content-Type').startsWith('text/html')) return;
    const fresh = new DOMParser().parseFromString(await response.text(), 'text/html');
    // Only the regions that show the fleet's state are replaced: the forms around them (the
    // filters, a ticked confirmation box, a half-typed value) stay as the admin left them.
    for (const region of document.querySelectorAll('[data-live-region]')) {
      const replacement = fresh.querySelector(`[data-live-region="${region.dataset.liveRegion}"]`);
      if (!replacement) continue;
      const focused = document.activeElement && region.contains(document.activeElement) ? document.activeElement.id : null;
      region.innerHTML = replacement.innerHTML;
      enhance(region);
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
    }
  }

  // MARK: - Small things

  function enhance(root) {
    for (const list of root.querySelectorAll('fieldset[data-list]')) enhanceList(list);
    for (const form of root.querySelectorAll('form[data-settings-form]')) enhanceSettingsForm(form);
    for (const button of root.querySelectorAll('button[data-copy]')) {
      button.hidden = false;
      button.addEventListener('click', async () => {
        const input = document.getElementById(button.dataset.copy);
        try {
          await navigator.clipboard.writeText(input.value);
          button.textContent = 'Copied';
        } catch {
          input.select();
          button.textContent = 'Press Ctrl+C';
        }
      });
    }
    for (const input of root.querySelectorAll('input[type="file"][data-load-into]')) {
      input.addEventListener('change', () => {
        const file = input.files[0];
        if (!file) return;
        file.text().then((text) => {
          document.getElementById(input.dataset.loadInto).value = text;
        });
      });
    }
  }

  enhance(document);
  follow();
})();
