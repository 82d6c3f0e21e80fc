"""The widgets of 07_label (ipywidgets 8): which run is labelled, with a choice of the others;
one example at a time, a button per label (a label moves on to the next answer), a notes box,
back, skip and next, keyboard shortcuts, a progress line, and a button that calibrates the run
against the labels given.

Every label is saved by `Session.label` the moment it is given. The card is rendered from the
autoescaping template `label_card.html`; the progress and the status are Label widgets, which
show text as text. The keyboard works through a small text box that keeps the focus: a key typed
there is read and the box emptied (1-5 or p/f label, n next, b back, s skip). JupyterLab may take
the focus back to the notebook after the box got it; `label_keys_focus.js` returns it to the box
until the user moves it.
"""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets as widgets

from evalbook.calibrate.labelling import KINDS, Labelling, LabellingError
from evalbook.calibrate.tables import agreement_frame, headline_html
from evalbook.errors import UnusableInput
from evalbook.templating import render

# keys beyond the labels' own: a binary label is typed as its first letter
KEYS = {"n": "next", "b": "back", "s": "skip"}
BINARY_KEYS = {"p": "pass", "f": "fail"}


class LabellingUI:
    """The widget box of a `Labelling`. `calibrate(labelling)` runs 06_calibrate on the labels
    given, as make calibrate does (evalbook.sidedocs.calibrate_labels: the runner is a layer
    above), and returns the calibration document and where it was written. `runs` are the runs
    that may be labelled instead, as (label, run id), and `open_run(run_id)` opens one of them."""

    def __init__(self, labelling: Labelling,
                 calibrate: Callable[[Labelling], tuple[dict[str, Any], str]] | None = None,
                 runs: list[tuple[str, str]] | None = None, open_run: Callable[[str], Labelling] | None = None):
        self.labelling, self.session = labelling, labelling.session
        self._calibrate, self._open_run = calibrate, open_run
        self.run_line = widgets.HTML()
        choices = list(runs or [])
        if labelling.report.run_id not in [run_id for _, run_id in choices]:
            choices.insert(0, (labelling.report.run_id, labelling.report.run_id))
        self.run_choice = widgets.Dropdown(options=choices, value=labelling.report.run_id,
                                           description="label run", layout=widgets.Layout(width="28rem"))
        if len(choices) < 2 or open_run is None:
            self.run_choice.layout.display = "none"
        self.run_choice.observe(self._chose_run, names="value")
        self.labels = KINDS[labelling.kind]
        self.key_map = {**({label: label for label in self.labels} if labelling.kind == "scale" else BINARY_KEYS),
                        **KEYS}
        self.progress = widgets.Label()
        self.card = widgets.HTML()
        self.label_buttons = [widgets.Button(description=label, tooltip=f"label {label} (key {self._key(label)})",
                                             layout=widgets.Layout(width="4.5rem")) for label in self.labels]
        for button, label in zip(self.label_buttons, self.labels):
            button.on_click(lambda _, label=label: self.give(label))
        self.note = widgets.Textarea(placeholder="a note (optional), saved with the label",
                                     layout=widgets.Layout(width="40rem", height="3.5rem"))
        self.back_button = widgets.Button(description="back", tooltip="back (key b)")
        self.skip_button = widgets.Button(description="skip", tooltip="skip (key s)")
        self.next_button = widgets.Button(description="next", tooltip="next (key n)")
        self.back_button.on_click(lambda _: self.move("back"))
        self.skip_button.on_click(lambda _: self.move("skip"))
        self.next_button.on_click(lambda _: self.move("next"))
        keys = ", ".join(self.key_map)
        self.keys = widgets.Text(placeholder=f"keys: {keys}", continuous_update=True,
                                 description="keys", layout=widgets.Layout(width="22rem"))
        self.keys.observe(self._typed, names="value")
        self.status = widgets.Label()
        self.calibrate_button = widgets.Button(description="calibrate with these labels", button_style="primary",
                                               layout=widgets.Layout(width="16rem"),
                                               disabled=calibrate is None)
        self.calibrate_button.on_click(lambda _: self.calibrate())
        self.calibration = widgets.Output()
        self.box = widgets.VBox([
            widgets.HBox([self.run_line, self.run_choice]), self.progress, self.card,
            widgets.HBox(self.label_buttons), self.note,
            widgets.HBox([self.back_button, self.skip_button, self.next_button, self.keys]),
            self.status, self.calibrate_button, self.calibration])
        self.refresh()

    def _key(self, label: str) -> str:
        return next(key for key, value in self.key_map.items() if value == label)

    def _ipython_display_(self) -> None:
        from IPython.display import Javascript, display  # IPython is there whenever a widget is shown

        display(self.box)
        self.keys.focus()
        # JupyterLab may focus the notebook after the widget took the focus (at the end of Run All):
        # this small script gives it back to the keys box until the user moves it (label_keys_focus.js)
        display(Javascript(render("label_keys_focus.js")))

    # ------------------------------------------------------------ actions

    def give(self, label: str) -> None:
        """Save `label` for the example shown, with the note typed so far, and move on to the next
        answer not labelled (back returns to change it)."""
        shown = self.session.current
        try:
            self.session.label(label, self.note.value)
        except (LabellingError, OSError) as error:
            self.status.value = f"not saved: {error}"
            return
        self.session.next()
        self.status.value = f"saved {label} for {shown} in {self.labelling.labels.path.name} (back changes it)"
        self.refresh()
        self.keys.focus()

    def _chose_run(self, change: dict[str, Any]) -> None:
        """Open the run chosen, keeping the note of the example shown first."""
        if self._open_run is None or change["new"] == self.labelling.report.run_id:
            return
        try:
            self.session.keep_note(self.note.value)
            labelling = self._open_run(change["new"])
        except (UnusableInput, OSError) as error:
            self.status.value = f"run {change['new']} not opened: {error}"
            self.run_choice.value = self.labelling.report.run_id
            return
        self.labelling, self.session = labelling, labelling.session
        self.status.value = f"now labelling run {labelling.report.run_id}; its labels go to {labelling.labels.path.name}"
        self.refresh()
        self.keys.focus()

    def move(self, where: str) -> None:
        """back, skip or next; a changed note is saved first with the label already given."""
        try:
            self.session.keep_note(self.note.value)
        except (LabellingError, OSError) as error:
            self.status.value = f"note not saved: {error}"
            return
        if where == "back":
            self.session.back()
        else:
            self.session.next()
        self.status.value = ""
        self.refresh()
        self.keys.focus()

    def _typed(self, change: dict[str, Any]) -> None:
        text = change["new"]
        if not text:
            return
        self.keys.value = ""
        for character in text.lower():
            action = self.key_map.get(character)
            if action in self.labels:
                self.give(action)
            elif action is not None:
                self.move("next" if action == "skip" else action)

    def calibrate(self) -> None:
        """Run the calibration of this run against the labels file, and show its headline."""
        self.calibration.clear_output()
        with self.calibration:
            if self._calibrate is None:
                print("calibrating needs the run's profile: run this notebook's cells from the top")
                return
            print(f"calibrating run {self.labelling.report.run_id} against {self.labelling.labels.path} "
                  "(06_calibrate, as make calibrate runs it) ...")
            try:
                document, location = self._calibrate(self.labelling)
            except (UnusableInput, OSError) as error:  # e.g. fewer than two labelled examples
                print(f"not calibrated: {error}")
                return
            from IPython.display import HTML, display  # IPython is there whenever a widget is shown

            display(HTML(headline_html(document)))
            display(agreement_frame(document))
            print(f"written to {location}, with its pages beside it")

    # ------------------------------------------------------------ what is shown

    def refresh(self) -> None:
        self.run_line.value = render("label_run.html", run_id=self.labelling.report.run_id,
                                     labels=self.labelling.labels.path.name, rater=self.labelling.labels.rater)
        self.progress.value = self.session.progress()
        view = self.labelling.view()
        done = view is None
        self.card.value = (render("label_card_done.html", n=len(self.session.sample.ids),
                                  command=self.labelling.calibrate_command()) if done
                           else render("label_card.html", **view))
        for button, label in zip(self.label_buttons, self.labels):
            button.button_style = "success" if label == self.session.shown_label else ""
            button.disabled = done
        self.note.value = self.session.shown_note
        self.note.disabled = self.skip_button.disabled = self.next_button.disabled = done
