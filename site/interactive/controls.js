// One block's controls over pictures drawn ahead (site/interactive.py inlines this after the block's JSON).
// A state's key is its controls' values as JSON, joined by "|", in the controls' order, as the builder writes it.
(function () {
  "use strict";
  var block = document.currentScript.parentElement;
  var data = JSON.parse(block.querySelector("script[type='application/json']").textContent);
  // Sphinx puts the way from this page to the site root on <html>; the pictures live under it at data.prefix.
  var root = document.documentElement.dataset.content_root || "";
  var img = block.querySelector("img");
  var readout = block.querySelector(".lab-static-readout");
  var controls = Array.prototype.slice.call(block.querySelectorAll("[data-values]"));
  var byName = {};
  controls.forEach(function (el) { byName[el.name] = el; });

  function value(el) {
    var values = JSON.parse(el.dataset.values);
    return values[el.type === "checkbox" ? (el.checked ? 1 : 0) : Number(el.value)];
  }

  function sync() {
    // The trips done go up to K, as the widget's trip slider does.
    if (byName.trip && byName.accumulation_steps) {
      byName.trip.max = value(byName.accumulation_steps);
    }
    controls.forEach(function (el) {
      if (el.type === "range") {
        el.setAttribute("aria-valuetext", String(value(el)));
        block.querySelector("output[for='" + el.id + "']").textContent = String(value(el));
      }
    });
  }

  function show() {
    sync();
    var key = controls.map(function (el) { return JSON.stringify(value(el)); }).join("|");
    var state = data.states[key];
    img.src = root + data.prefix + state.png;
    img.alt = state.alt;
    readout.innerHTML = state.readout;
  }

  sync();
  controls.forEach(function (el) {
    el.addEventListener("input", show);
    el.addEventListener("change", show);  // where a checkbox or menu sends no "input"
  });
})();
