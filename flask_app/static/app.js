// GourmetGram page: pick or drop a photo, preview it, submit without leaving the page.
(function () {
  "use strict";
  const form = document.getElementById("upload-form");
  const input = document.getElementById("file-input");
  const zone = document.getElementById("dropzone");
  const preview = document.getElementById("preview");
  const hint = document.getElementById("hint");
  const submit = document.getElementById("submit");
  const result = document.getElementById("result");
  const maxBytes = Number(form.dataset.maxBytes);

  function showMessage(text) {
    const card = document.createElement("div");
    card.className = "card error";
    card.dataset.status = "error";
    card.textContent = text;
    result.replaceChildren(card);
  }

  function choose(file) {
    result.replaceChildren();
    if (!file) { submit.disabled = true; return; }
    if (preview.src) { URL.revokeObjectURL(preview.src); }
    preview.src = URL.createObjectURL(file);
    preview.hidden = false;
    hint.hidden = true;
    // the server refuses it too (413); saying so now saves a long, useless upload
    const tooLarge = file.size > maxBytes;
    if (tooLarge) { showMessage("That file is too large: the limit is " + form.dataset.maxSize + "."); }
    submit.disabled = tooLarge;
  }

  preview.addEventListener("error", () => {
    // the browser cannot draw it; the server will say why (it checks the content, not the name)
    preview.hidden = true;
    hint.hidden = false;
    hint.textContent = "No preview for " + input.files[0].name + " — it may not be an image.";
  });
  input.addEventListener("change", () => choose(input.files[0]));
  ["dragenter", "dragover"].forEach((type) => zone.addEventListener(type, (event) => {
    event.preventDefault();
    zone.classList.add("over");
  }));
  ["dragleave", "drop"].forEach((type) => zone.addEventListener(type, () => zone.classList.remove("over")));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    if (event.dataTransfer.files.length) {
      input.files = event.dataTransfer.files;
      choose(input.files[0]);
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!input.files.length) { showMessage("No file chosen: pick a food photo first."); return; }
    submit.disabled = true;
    const busy = document.createElement("p");
    busy.className = "busy";
    busy.textContent = "Classifying…";
    result.replaceChildren(busy);
    try {
      const response = await fetch(form.action, { method: "POST", body: new FormData(form) });
      result.innerHTML = await response.text();
    } catch (error) {
      showMessage("Could not reach GourmetGram (" + error.message + "). Please try again.");
    } finally {
      submit.disabled = false;
    }
  });
})();
