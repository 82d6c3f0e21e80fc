// The runs index's filter box: each row (a run with its reason line, a comparison, a calibration)
// stays shown while its text holds every word typed, in any case. The box stays hidden where
// scripts do not run, and every row shows.
(() => {
  const box = document.getElementById("evalbook-filter");
  const count = document.getElementById("evalbook-filter-count");
  const rows = Array.from(document.querySelectorAll("[data-filter-row]"));
  box.closest(".filter").hidden = false;
  const apply = () => {
    const words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const row of rows) {
      const text = (row.textContent + " " + (row.dataset.filterText || "")).toLowerCase();
      const match = words.every((word) => text.includes(word));
      row.hidden = !match;
      shown += match ? 1 : 0;
    }
    count.textContent = words.length ? `${shown} of ${rows.length} rows shown` : "";
  };
  box.addEventListener("input", apply);
  apply();
})();
