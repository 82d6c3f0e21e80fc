// 07_label: the keys box keeps the focus until the user moves it.
// JupyterLab focuses the notebook's active cell when "Run All" has scrolled to the last cell, and
// that can come after the widget took the focus. The keys typed next would then be notebook
// commands ("1" turns a cell into a heading, "b" inserts one), not labels. So, until the user
// clicks, taps or types anywhere but in the box (Tab and Escape count as moving away), this gives
// the focus back to the newest keys box whenever something else took it. It stops after a minute.
(() => {
  const limit = Date.now() + 60000;
  const newestBox = () => {
    const boxes = document.querySelectorAll("input[placeholder^='keys:']");
    return boxes.length ? boxes[boxes.length - 1] : null;
  };
  let timer = null;
  const stop = () => {
    clearInterval(timer);
    document.removeEventListener("pointerdown", moved, true);
    document.removeEventListener("keydown", moved, true);
  };
  function moved(event) {
    const box = newestBox();
    if (event.type === "keydown" && box && event.target === box && event.key !== "Tab" && event.key !== "Escape") {
      return;  // a key typed into the box: labelling, not moving away
    }
    stop();
  }
  const keep = () => {
    if (Date.now() > limit) {
      stop();
      return;
    }
    const box = newestBox();
    if (box && box.isConnected && box.offsetParent !== null && document.activeElement !== box) {
      box.focus();
    }
  };
  document.addEventListener("pointerdown", moved, true);
  document.addEventListener("keydown", moved, true);
  timer = setInterval(keep, 200);
})();
