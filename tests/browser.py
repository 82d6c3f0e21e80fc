"""Open a local HTML page in headless Debian Chromium with the network cut off, and report what it
did: every request, the ones that tried to leave the machine, each image's loaded size, the
console errors, the dialogs a script opened (alert, confirm, prompt), and the elements that could
run script (inline event handlers, javascript: URLs, script elements).

Playwright drives the system Chromium (`/usr/bin/chromium`); no Playwright browser download is
used. The context is offline and a route aborts, and records, anything that is not file:, data:,
blob: or about:, so a page that phones home is seen even when the request would fail anyway.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

CHROMIUM = Path("/usr/bin/chromium")
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
]
_IMAGES = """() => Array.from(document.images, (image) => ({
    complete: image.complete,
    naturalWidth: image.naturalWidth,
    naturalHeight: image.naturalHeight,
    src: image.getAttribute("src")?.slice(0, 40) ?? null,
}))"""


# Elements able to run script: event handler attributes, javascript: URLs, script elements; and
# the elements that payloads of hostile text create (<details ontoggle>, <svg onload>).
_ACTIVE = """() => {
    const all = Array.from(document.querySelectorAll("*"));
    const describe = (element) => element.outerHTML.slice(0, 120);
    return {
        handlers: all.filter((element) => Array.from(element.attributes).some(
            (attribute) => attribute.name.toLowerCase().startsWith("on"))).map(describe),
        javascript_urls: all.filter((element) => Array.from(element.attributes).some(
            (attribute) => attribute.value.trim().toLowerCase().startsWith("javascript:"))).map(describe),
        scripts: Array.from(document.scripts, (script) => ({
            type: script.type, text: script.text.slice(0, 120)})),
        details: Array.from(document.querySelectorAll("details")).map(describe),
        svgs: Array.from(document.querySelectorAll("svg")).map(describe),
    };
}"""


def is_local(url: str) -> bool:
    return url.lower().startswith(LOCAL_SCHEMES)


@contextmanager
def offline_browser() -> Iterator[Any]:
    """A launched headless Chromium (a Playwright Browser), closed on exit."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing; the offline HTML tests need it: "
                           "install Debian's chromium: make setup does it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def inspect_offline(html_path: Path, browser: Any | None = None) -> dict[str, Any]:
    """Load `html_path` offline and return what happened.

    Keys: `requests` (every URL the page requested, in order), `non_local_requests` (those not
    file:/data:/blob:/about:, including any the route aborted), `images` (one dict per <img>:
    complete, naturalWidth, naturalHeight, src (its first 40 characters)), `console_errors`
    (console errors and uncaught page errors), `title`, `dialogs` (the message of every alert,
    confirm, prompt or beforeunload dialog, each dismissed), `active` (elements that could run
    script: `handlers` with an on* attribute, `javascript_urls`, `scripts` with their type and
    text, `details` and `svgs`; each element as the start of its outerHTML) and `text` (the
    document's textContent). Pass a `browser` from `offline_browser()` to reuse one launch;
    without it, one is launched for this call.
    """
    if browser is None:
        with offline_browser() as launched:
            return _inspect(launched, Path(html_path))
    return _inspect(browser, Path(html_path))


def _inspect(browser: Any, html_path: Path) -> dict[str, Any]:
    requests: list[str] = []
    aborted: list[str] = []
    console_errors: list[str] = []
    dialogs: list[str] = []

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    def only_local(route: Any) -> None:
        url = route.request.url
        if is_local(url):
            route.continue_()
        else:
            aborted.append(url)
            route.abort()

    context = browser.new_context(offline=True, service_workers="block")
    try:
        context.route("**/*", only_local)
        page = context.new_page()
        page.on("request", lambda request: requests.append(request.url))
        page.on("console", lambda message: console_errors.append(message.text)
                if message.type == "error" else None)
        page.on("pageerror", lambda error: console_errors.append(str(error)))
        page.on("dialog", dismiss)
        page.goto(html_path.resolve().as_uri(), wait_until="load")
        page.wait_for_load_state("networkidle")
        images = page.evaluate(_IMAGES)
        active = page.evaluate(_ACTIVE)
        text = page.evaluate("() => document.documentElement.textContent")
        title = page.title()
    finally:
        context.close()
    non_local = [url for url in requests if not is_local(url)]
    non_local += [url for url in aborted if url not in non_local]
    return {"requests": requests, "non_local_requests": non_local, "images": images,
            "console_errors": console_errors, "title": title, "dialogs": dialogs, "active": active,
            "text": text}


_ABOVE = """(height) => {
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const above = [];
    while (walker.nextNode()) {
        const node = walker.currentNode;
        if (!node.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        const box = range.getBoundingClientRect();
        if (box.height > 0 && box.top < height) above.push(node.textContent.trim());
    }
    return above.join(" ");
}"""
# A table not laid out (hidden, as the explorer's is until its script has drawn the rows) is not
# one a reader sees empty.
_EMPTY_TABLES = """() => Array.from(document.querySelectorAll("table"))
    .filter((table) => table.getClientRects().length > 0 && table.querySelectorAll("tbody tr").length === 0)
    .map((table) => table.outerHTML.slice(0, 120))"""


def first_screen(html_path: Path, width: int = 1280, height: int = 900, browser: Any | None = None) -> dict[str, Any]:
    """What a reader sees of `html_path` on a `width` x `height` screen before scrolling, offline:
    `above` (the text laid out above `height`), `empty_tables` (the start of every table without
    a body row) and `text` (the whole page's visible text)."""
    if browser is None:
        with offline_browser() as launched:
            return first_screen(html_path, width, height, launched)
    context = browser.new_context(offline=True, viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.goto(Path(html_path).resolve().as_uri(), wait_until="load")
        return {"above": page.evaluate(_ABOVE, height), "empty_tables": page.evaluate(_EMPTY_TABLES),
                "text": page.evaluate("() => document.body.innerText")}
    finally:
        context.close()
