"""07_label on a real run of the sample: executed by Papermill (it writes nothing), calibrated
through its button (make calibrate's code), and labelled in JupyterLab in Debian's Chromium with
the keyboard alone, then reopened to resume. The run's questions and answers carry hostile text:
it shows as text, and no dialog fires."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pandas as pd
import papermill
import pytest
import yaml

from browser import offline_browser
from evalbook.calibrate.labeller import LabellingUI
from evalbook.calibrate.labelling import open_labelling
from evalbook.sidedocs import calibrate_labels
from hostile import IMG, SCRIPT
from evalbook.processes import end_process
from local_servers import free_port
from paths import ROOT

pytestmark = pytest.mark.slow
NOTEBOOK = ROOT / "notebooks" / "07_label.ipynb"
HOSTILE_QUESTION = f"{SCRIPT} which bin?"
HOSTILE_ANSWER = f"{IMG} the teal one"
N = 10  # answers to label in the browser
SCREENSHOT_FOR_DOCS = "EVALBOOK_DOCS_SCREENSHOTS"  # set to write the docs' screenshot into docs/images/


class LabelledRun:
    def __init__(self, outputs: Path, profile: Path, run_id: str):
        self.outputs, self.profile, self.run_id = outputs, profile, run_id


@pytest.fixture(scope="module")
def hostile_run(sample_runs, tmp_path_factory) -> LabelledRun:
    """A copy of the sample's outputs root (the candidate run removed, so the baseline is the
    latest) where the first answer 07_label shows carries hostile text in its question and answer
    (the others stay clean, for the docs' screenshot)."""
    outputs = tmp_path_factory.mktemp("label") / "outputs"
    shutil.copytree(sample_runs.outputs, outputs)
    candidate = Path(sample_runs.candidate.run_dir.relative_to(sample_runs.outputs))
    shutil.rmtree(outputs / candidate)
    (outputs / candidate).with_suffix(".json").unlink()
    report_path = outputs / Path(sample_runs.baseline.run_dir.relative_to(sample_runs.outputs)).with_suffix(".json")
    values = yaml.safe_load(sample_runs.profile.read_text("utf-8"))
    values["outputs_root"] = str(outputs)
    profile = outputs.parent / "profile.yaml"
    profile.write_text(yaml.safe_dump(values, sort_keys=False), "utf-8")
    # the scores stay as they are, so the sample (and the first answer shown) does not change
    first = open_labelling(str(profile), None, str(outputs.parent / "unused.csv"), "x", "scale", N, 0, True).session.current
    report = json.loads(report_path.read_text("utf-8"))
    for example in (e for e in report["examples"] if e["id"] == first):
        example["question"] = f"{HOSTILE_QUESTION} {example['question']}"
        example["generated_answer"] = f"{HOSTILE_ANSWER} {example['generated_answer']}"
    report_path.write_text(json.dumps(report), "utf-8")
    return LabelledRun(outputs, profile, report["run_id"])


def files_under(root: Path) -> dict[str, float]:
    return {str(path.relative_to(root)): path.stat().st_mtime for path in root.rglob("*") if path.is_file()}


def test_papermill_runs_07_to_the_end_and_it_writes_nothing(hostile_run, tmp_path):
    before = files_under(hostile_run.outputs)
    executed = tmp_path / "07.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(executed), parameters={"params_path": str(hostile_run.profile)},
                               cwd=str(ROOT / "notebooks"), kernel_name="python3", progress_bar=False)
    text = executed.read_text("utf-8")
    assert "Labelling needs JupyterLab" in text and "writes nothing" in text
    assert f"make calibrate RUN={hostile_run.run_id}" in text
    assert files_under(hostile_run.outputs) == before  # no labels file, no folder, nothing touched


def test_the_calibrate_button_calibrates_the_run_against_the_labels_given(hostile_run, tmp_path, capsys):
    labels = tmp_path / "labels.csv"
    labelling = open_labelling(str(hostile_run.profile), None, str(labels), "ana", "scale", 8, 0, True)
    ui = LabellingUI(labelling, calibrate=calibrate_labels)
    for key in "54321542":
        ui.keys.value = key
    assert ui.progress.value == "8 of 8 labelled, 0 skipped"
    ui.calibrate_button.click()
    printed = capsys.readouterr().out
    [written] = list(hostile_run.outputs.rglob("calibration/*.json"))
    assert f"written to {written}" in printed
    document = json.loads(written.read_text("utf-8"))
    assert document["labels"]["kind"] == "ordinal" and document["matching"]["n_matched"] == 8
    assert document["labels"]["raters"] == ["ana"]


# ---------------------------------------------------------------- JupyterLab in Chromium


@pytest.fixture
def lab(hostile_run, tmp_path):
    """JupyterLab on 127.0.0.1 with a token, serving a folder holding 07_label with its parameters
    set to the hostile run and a labels file in tmp_path."""
    folder = tmp_path / "lab"
    folder.mkdir()
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    [cell] = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    labels = tmp_path / "labels.csv"
    cell.source += (f"\nparams_path = {str(hostile_run.profile)!r}\nlabels_path = {str(labels)!r}"
                    f"\nrater = 'ana'\nn = {N}")
    nbformat.write(notebook, folder / "07_label.ipynb")
    port, token = free_port(), uuid.uuid4().hex
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
               f"--IdentityProvider.token={token}", "--allow-root", f"--ServerApp.root_dir={folder}", "--LabApp.expose_app_in_browser=True",
               "--ServerApp.disable_check_xsrf=False", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
               "jupyterlab.NeverCheckForUpdate"]
    log = (tmp_path / "lab.log").open("w")
    environment = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
                   "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=folder)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert server.poll() is None, (tmp_path / "lab.log").read_text()
            time.sleep(0.5)
    try:
        yield {"url": url, "token": token, "labels": labels, "log": tmp_path / "lab.log"}
    finally:
        end_process(server)
        log.close()


def open_and_run(browser, lab, dialogs: list[str]):
    """A new page with 07_label opened and all its cells run; the page and its context."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(lab["url"])
                  or route.request.url.startswith(("data:", "blob:")) else route.abort())
    page = context.new_page()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{lab['url']}/lab/tree/07_label.ipynb?token={lab['token']}")
    page.wait_for_function("() => window.jupyterapp && document.querySelector('.jp-NotebookPanel')", timeout=120_000)
    page.wait_for_function("""() => {
        const panel = window.jupyterapp.shell.currentWidget;
        return panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel
            && panel.sessionContext.session.kernel.status === 'idle';
    }""", timeout=120_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_selector("input[placeholder^='keys']", timeout=180_000)
    return context, page


def keys_box_has_the_focus(page) -> None:
    """Wait until the keys box holds the focus; on a timeout, say what holds it instead."""
    try:
        page.wait_for_function("() => (document.activeElement?.placeholder || '').startsWith('keys')", timeout=30_000)
    except Exception:
        holder = page.evaluate("() => { const e = document.activeElement; return e ? `${e.tagName}.${e.className}` : 'nothing'; }")
        raise AssertionError(f"the keys box never had the focus; {holder} has it") from None


def progress(page) -> str:
    return page.locator(".widget-label", has_text="labelled").first.inner_text()


SHOWN_ID = """() => {
    const id = document.querySelector('.evalbook-label-id');
    if (id) return id.innerText.replace(/^Example /, '');
    return document.querySelector('.evalbook-label') ? '' : null;
}"""


def shown_id(page) -> str:
    """The id of the example shown; "" once the card says the sample is done. Read in one
    evaluation and waited for while the widget is between two cards: two queries could straddle a
    re-render and wait on an element that never comes back (seen on the last card under load)."""
    deadline = time.monotonic() + 30
    while (shown := page.evaluate(SHOWN_ID)) is None:
        assert time.monotonic() < deadline, "no card shown for 30 s"
        time.sleep(0.1)
    return shown


def press(page, key: str, until) -> None:
    """Type `key` where the focus is, then wait until `until(page)` holds."""
    page.keyboard.press(key)
    deadline = time.monotonic() + 30
    while not until(page):
        assert time.monotonic() < deadline, f"after {key!r}: progress {progress(page)!r}, example {shown_id(page)!r}"
        time.sleep(0.1)


def labels_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return pd.read_csv(path, dtype=str, keep_default_na=False)[["id", "label", "rater"]].to_dict("records")


def kernels_shut_down(lab) -> None:
    """Every kernel of the server shut down through its REST API, as closing the notebook does."""
    from urllib.request import Request, urlopen

    headers = {"Authorization": f"token {lab['token']}"}
    with urlopen(Request(f"{lab['url']}/api/kernels", headers=headers)) as response:
        kernels = json.loads(response.read())
    for kernel in kernels:
        urlopen(Request(f"{lab['url']}/api/kernels/{kernel['id']}", headers=headers, method="DELETE")).close()


def test_labelled_with_the_keyboard_in_jupyterlab_and_resumed_after_reopening(lab, hostile_run, tmp_path):
    dialogs: list[str] = []
    labels = lab["labels"]
    with offline_browser() as browser:
        context, page = open_and_run(browser, lab, dialogs)
        # the keys box has the focus as soon as it shows: the keyboard alone labels
        keys_box_has_the_focus(page)
        first = shown_id(page)
        assert progress(page) == "0 of 10 labelled, 0 skipped"
        assert hostile_run.run_id in page.locator(".evalbook-label-run").first.inner_text()  # the run labelled
        card = page.locator(".evalbook-label").first.inner_text()
        assert SCRIPT in card and IMG in card  # hostile text shown as text
        # a label moves on to the next answer; b goes back to change it
        press(page, "4", lambda p: labels_rows(labels) == [{"id": first, "label": "4", "rater": "ana"}]
              and shown_id(p) != first)
        second = shown_id(page)
        press(page, "b", lambda p: shown_id(p) == first)
        press(page, "2", lambda p: labels_rows(labels) == [{"id": first, "label": "2", "rater": "ana"}]
              and shown_id(p) == second)
        assert progress(page) == "1 of 10 labelled, 0 skipped"
        active = page.evaluate("""() => Array.from(document.querySelectorAll('.evalbook-label *')).filter(
            (e) => Array.from(e.attributes).some((a) => a.name.startsWith('on')) || ['SCRIPT', 'IMG'].includes(e.tagName)
        ).length""")
        assert active == 0
        context.close()
    assert labels_rows(labels) == [{"id": first, "label": "2", "rater": "ana"}]

    kernels_shut_down(lab)
    with offline_browser() as browser:
        context, page = open_and_run(browser, lab, dialogs)
        keys_box_has_the_focus(page)
        assert shown_id(page) == second and progress(page) == "1 of 10 labelled, 0 skipped"  # resumed
        assert HOSTILE_QUESTION not in page.locator(".evalbook-label").first.inner_text()
        press(page, "5", lambda p: len(labels_rows(labels)) == 2 and shown_id(p) != second)
        widget = page.locator(".widget-vbox", has=page.locator(".evalbook-label")).first
        widget.scroll_into_view_if_needed()
        screenshot = widget.screenshot()
        (tmp_path / "07_label.png").write_bytes(screenshot)
        if os.environ.get(SCREENSHOT_FOR_DOCS):
            (ROOT / "docs" / "images").mkdir(exist_ok=True)
            (ROOT / "docs" / "images" / "07_label.png").write_bytes(screenshot)
        # the box keeps the focus only until the user moves it: a click into the notes stays there
        page.locator("textarea[placeholder^='a note']").first.click()
        time.sleep(1)
        assert page.evaluate("() => document.activeElement.tagName") == "TEXTAREA"
        third = shown_id(page)
        page.get_by_role("button", name="next").first.click()  # and a button gives it back to the box
        keys_box_has_the_focus(page)
        assert shown_id(page) != third  # skipped: it comes round again at the end
        for done in range(2, N):  # the rest of the sample, with the keyboard alone
            shown = shown_id(page)
            press(page, "3", lambda p: len(labels_rows(labels)) == done + 1 and shown_id(p) != shown)
        assert progress(page) == f"{N} of {N} labelled, 0 skipped"
        context.close()
    rows = labels_rows(labels)
    assert rows[:2] == [{"id": first, "label": "2", "rater": "ana"}, {"id": second, "label": "5", "rater": "ana"}]
    assert len(rows) == N and len({row["id"] for row in rows}) == N and dialogs == []

    # make calibrate reads the file as it is
    result = subprocess.run(["make", "-s", "-o", "setup", "calibrate", f"PY={sys.executable}", f"PARAMS={hostile_run.profile}",
                             f"RUN={hostile_run.run_id}", f"LABELS={labels}", "ARGS=--label-kind ordinal"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    [written] = [path for path in hostile_run.outputs.rglob("calibration/*.json") if path.stem in result.stdout]
    document = json.loads(written.read_text("utf-8"))
    assert document["matching"]["n_matched"] == N and document["labels"]["raters"] == ["ana"]
