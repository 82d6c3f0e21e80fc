// 04_report: a link to a failing answer's record opens it. A closed details element is not opened
// by following a link to it, so each link of the failing answers' table opens its target here.
(() => {
  const open = (hash) => {
    const target = hash && document.getElementById(hash.slice(1));
    if (target && target.tagName === "DETAILS") target.open = true;
  };
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a.evalbook-record-link");
    if (link) open(link.getAttribute("href"));
  });
  window.addEventListener("hashchange", () => open(window.location.hash));
  open(window.location.hash);
})();
