// The copy button of a new API key. Without JavaScript the key is still selectable in its field.
for (const button of document.querySelectorAll('button[data-copy]')) {
  button.addEventListener('click', async () => {
    const input = document.getElementById(button.dataset.copy);
    const status = document.getElementById('copy-status');
    if (!input) return;
    try {
      await navigator.clipboard.writeText(input.value);
      if (status) status.textContent = 'Copied to the clipboard.';
    } catch {
      // Clipboard access can be refused (permissions, plain http): select it for Ctrl+C instead.
      input.focus();
      input.select();
      if (status) status.textContent = 'Selected: press Ctrl+C (or ⌘C) to copy.';
    }
  });
}
