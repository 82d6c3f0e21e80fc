"""Human labels given one example at a time (07_label): which examples, in what order, and the
labels file that 06_calibrate reads, written the moment each label is given.

- **The sample** (`stratified_sample`) is stratified across one metric of the run: the examples
  with a value are sorted by it and cut into `n` bands of equal size, and one example is drawn
  from each band with a seeded generator. Good, middling and bad answers are all represented, so
  a calibration sees both sides of any threshold. The sample is then shown in a seeded random
  order, so that the rater never sees the answers sorted by their score.
- **The labels file** (`LabelsFile`) holds one row per (example, rater): `id`, `label`,
  `rater`, `note` and `labelled_at` (UTC), as CSV, JSONL or Parquet by its suffix. Each label
  rewrites the whole file atomically, under a lock, so a kernel that dies loses at most the label
  being typed and two raters labelling at once never lose each other's rows. A label given
  again replaces this rater's row for that example; other raters' rows are kept as they are.
- **The session** (`Session`) is where the rater is: the examples still to label, the one shown,
  the ones skipped. It starts after the last example this rater labelled, so that opening the
  notebook again resumes where they stopped, and never shows an example they labelled.
"""

from __future__ import annotations

import getpass
import io
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from filelock import FileLock

from evalbook.calibrate.context import run_to_calibrate
from evalbook.calibrate.labels import BINARY_SCALE, COLUMNS as LABEL_COLUMNS
from evalbook.errors import UnusableInput
from evalbook.files import write_atomically
from evalbook.layout import CANONICAL, labels_file
from evalbook.metrics import METRICS, metric as registered
from evalbook.params import load_profile, local_outputs_root, locate_profile
from evalbook.report.reader import RunReport, judge_entry, read_report
from evalbook.runs import collect_run_records
from evalbook.storage import StorageError, read_bytes

# The label kinds the rater chooses from; each as calibrate reads it (`--label-kind`)
KINDS = {"scale": ("1", "2", "3", "4", "5"), "binary": ("pass", "fail")}
CALIBRATE_KIND = {"scale": "ordinal", "binary": "binary"}
# each kind's scale as written in the labels file's scale column: calibrate checks the labels
# against it instead of guessing the scale from the labels given
SCALE_WRITTEN = {"scale": f"{KINDS['scale'][0]}-{KINDS['scale'][-1]}", "binary": BINARY_SCALE}
COLUMNS = (*LABEL_COLUMNS, "labelled_at")  # what 06_calibrate reads, and when
SUFFIXES = (".csv", ".jsonl", ".parquet")
STRATIFY_FALLBACK = "bertscore_f1"


class LabellingError(UnusableInput, ValueError):
    """A labelling setting or labels file that cannot be used; the message says which and why."""


def check_kind(label_kind: str) -> tuple[str, ...]:
    """The labels of `label_kind` (scale: 1-5, binary: pass/fail), in button order."""
    if label_kind not in KINDS:
        raise LabellingError(f"label_kind must be one of {', '.join(KINDS)}, got {label_kind!r}")
    return KINDS[label_kind]


# ---------------------------------------------------------------- which examples

@dataclass(frozen=True)
class Sample:
    """The examples to label, in the order they are shown, and how they were chosen."""

    ids: tuple[str, ...]
    metric: str  # the metric the sample is stratified on (a registry name)
    n_examples: int  # the run's examples
    n_without_value: int  # left out: no value of `metric`
    seed: int
    why_metric: str

    def describe(self) -> str:
        label = registered(self.metric).label
        chosen = len(self.ids)
        with_value = self.n_examples - self.n_without_value
        if chosen < with_value:
            how = (f"{chosen} of the run's {self.n_examples} examples: the {with_value} with a {label} were sorted "
                   f"by it and cut into {chosen} bands of equal size, and one example was drawn from each "
                   f"band (seed {self.seed}), so low, middling and high scores are all here")
        else:
            how = f"all {chosen} of the run's {self.n_examples} examples with a {label}"
        left = (f" {self.n_without_value} example(s) without a {label} are left out."
                if self.n_without_value else "")
        return (f"{how}. They are shown in a random order (seed {self.seed}), never sorted by score. "
                f"Stratified on {label}: {self.why_metric}.{left}")


def stratify_metric(report: Any, n: int) -> tuple[str, str]:
    """The metric to stratify on, and why: the judge's first headline metric when the judge ran and
    scored at least as many examples as the sample needs, else BERTScore F1."""
    wanted = min(n, len(report.examples))
    for described in report.judged_metrics():
        if not described.headline:
            continue
        scored = sum(value is not None for value in report.values(described.name))
        if scored >= wanted:
            return described.name, "the judge's score, since the judge ran on this run"
        return STRATIFY_FALLBACK, (f"the judge scored {scored} examples on {described.label}, fewer than the "
                                   f"{wanted} to label")
    return STRATIFY_FALLBACK, "the judge did not run on this run"


def stratified_sample(values: Sequence[tuple[str, float | None]], n: int, seed: int, metric: str,
                      why_metric: str = "") -> Sample:
    """`n` example ids stratified across their `values` (id, value), in a seeded random order.

    The ids with a finite value are sorted by (value, id) and cut into min(n, their number) bands
    of equal size (numpy's array_split); one id is drawn from each band. Ids without a value are
    left out and counted.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise LabellingError(f"n must be a whole number of examples, 1 or more, got {n!r}")
    valued = sorted((float(v), i) for i, v in values if v is not None and math.isfinite(float(v)))
    rng = np.random.default_rng(seed)
    bands = np.array_split(np.arange(len(valued)), min(n, len(valued))) if valued else []
    chosen = [valued[int(rng.choice(band))][1] for band in bands]
    order = rng.permutation(len(chosen))
    return Sample(ids=tuple(chosen[i] for i in order), metric=metric, n_examples=len(values),
                  n_without_value=len(values) - len(valued), seed=seed, why_metric=why_metric)


# ---------------------------------------------------------------- the labels file

class LabelsFile:
    """A labels file that rows are added to, one label at a time, for one rater."""

    def __init__(self, path: str | Path, rater: str):
        if str(path).startswith("s3://"):
            raise LabellingError(f"{path}: labels are written to a local file; give labels_path a local path")
        self.path = Path(path)
        if self.path.suffix.lower() not in SUFFIXES:
            raise LabellingError(f"{self.path}: a labels file is {', '.join(SUFFIXES)}; give labels_path such a name")
        if not isinstance(rater, str) or not rater.strip():
            raise LabellingError("rater must name who labels (a non-empty text): set the rater parameter")
        self.rater = rater.strip()
        self._lock = FileLock(f"{self.path}.lock")

    def read(self) -> pd.DataFrame:
        """Every row of the file (all raters) as text; an empty table when it does not exist yet."""
        if not self.path.exists():
            return pd.DataFrame(columns=list(COLUMNS), dtype=object)
        suffix = self.path.suffix.lower()
        try:
            if suffix == ".csv":
                table = pd.read_csv(self.path, dtype=str, keep_default_na=False)
            elif suffix == ".jsonl":
                table = pd.read_json(self.path, lines=True, dtype=False)
            else:
                table = pd.read_parquet(self.path)
        except (OSError, ValueError) as error:
            raise LabellingError(f"{self.path}: cannot be read as a labels file ({error}); "
                                 "give another labels_path") from None
        missing = [column for column in ("id", "label") if column not in table.columns]
        if len(table) and missing:
            raise LabellingError(f"{self.path}: has no column {', '.join(missing)}, so it is no labels file; "
                                 "give another labels_path")
        for column in COLUMNS:
            if column not in table.columns:
                table[column] = ""
        table = table.astype(object).where(table.notna(), "")
        return table.astype({column: str for column in COLUMNS})

    def mine(self) -> dict[str, dict[str, str]]:
        """This rater's rows, by example id."""
        table = self.read()
        rows = table[table["rater"] == self.rater]
        return {row["id"]: row for row in rows[list(COLUMNS)].to_dict("records")}

    def save(self, example_id: str, label: str, note: str = "", scale: str = "", now: datetime | None = None) -> None:
        """Write this rater's `label` (and `note`, and the `scale` it was given on) for
        `example_id`, replacing their earlier row for it; other rows are kept in their order. The
        file is rewritten atomically."""
        moment = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds").replace("+00:00", "Z")
        row = {"id": example_id, "label": label, "rater": self.rater, "note": note or "", "scale": scale,
               "labelled_at": moment}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            table = self.read()
            mine = (table["rater"] == self.rater) & (table["id"] == example_id)
            if mine.any():
                position = int(np.flatnonzero(mine)[0])
                table = table[~mine | (np.arange(len(table)) == position)].reset_index(drop=True)
                for column, value in row.items():
                    table.loc[position, column] = value
            else:
                table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
            write_atomically(self.path, _encoded(table, self.path.suffix.lower()), overwrite=True)


def _encoded(table: pd.DataFrame, suffix: str) -> bytes:
    if suffix == ".csv":
        return table.to_csv(index=False).encode("utf-8")
    if suffix == ".jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in table.to_dict("records")).encode("utf-8")
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return buffer.getvalue()


# ---------------------------------------------------------------- where the rater is

@dataclass
class Session:
    """A rater's way through a sample: the example shown, the ones labelled and skipped."""

    sample: Sample
    labels: LabelsFile
    kind: str
    position: int = 0
    skipped: set[str] = field(default_factory=set)
    given: dict[str, dict[str, str]] = field(default_factory=dict)  # this rater's rows in the sample

    @classmethod
    def start(cls, sample: Sample, labels: LabelsFile, kind: str) -> Session:
        """A session that resumes after the last example of the sample this rater labelled (the
        earlier ones they skipped come round again at the end); at the start when they have none."""
        check_kind(kind)
        mine = labels.mine()
        given = {i: mine[i] for i in sample.ids if i in mine}
        session = cls(sample, labels, kind, given=given)
        done = [position for position, i in enumerate(sample.ids) if i in given]
        session.position = session._next_open(done[-1] if done else -1)
        return session

    @property
    def current(self) -> str | None:
        """The id shown; None when every example of the sample is labelled."""
        return None if self.position is None else self.sample.ids[self.position]

    def _next_open(self, after: int) -> int | None:
        """The first position after `after`, going round, whose example is not labelled."""
        count = len(self.sample.ids)
        for step in range(1, count + 1):
            position = (after + step) % count
            if self.sample.ids[position] not in self.given:
                return position
        return None

    def label(self, value: str, note: str = "") -> None:
        """Save `value` for the example shown, at once; the example stays shown."""
        if self.current is None:
            raise LabellingError("every example of the sample is labelled: nothing is shown to label")
        if value not in KINDS[self.kind]:
            raise LabellingError(f"{value!r} is not a {self.kind} label; the labels are {', '.join(KINDS[self.kind])}")
        self.labels.save(self.current, value, note, SCALE_WRITTEN[self.kind])
        self.given[self.current] = {"id": self.current, "label": value, "note": note or ""}
        self.skipped.discard(self.current)

    def keep_note(self, note: str) -> None:
        """Save a changed note with the label already given for the example shown."""
        row = self.given.get(self.current) if self.current is not None else None
        if row is not None and (note or "") != row.get("note", ""):
            self.label(row["label"], note)

    def next(self) -> None:
        """On to the next example not labelled; one left without a label counts as skipped."""
        if self.current is None:
            return
        if self.current not in self.given:
            self.skipped.add(self.current)
        self.position = self._next_open(self.position)

    def back(self) -> None:
        """Back to the example shown before this one in the sample's order, labelled or not."""
        count = len(self.sample.ids)
        self.position = ((self.position if self.position is not None else count) - 1) % count

    @property
    def shown_label(self) -> str | None:
        row = self.given.get(self.current) if self.current is not None else None
        return row["label"] if row else None

    @property
    def shown_note(self) -> str:
        row = self.given.get(self.current) if self.current is not None else None
        return row.get("note", "") if row else ""

    def progress(self) -> str:
        """`12 of 60 labelled, 3 skipped`."""
        skipped = len(self.skipped - set(self.given))
        return f"{len(self.given)} of {len(self.sample.ids)} labelled, {skipped} skipped"


# ---------------------------------------------------------------- what is shown

def example_view(example: dict[str, Any], context: str | None, report: Any, blind: bool) -> dict[str, Any]:
    """What the card shows of one example: its texts, what the judge said, and its scores unless
    `blind` (then only that they are hidden)."""
    judge = []
    for described in report.judged_metrics():
        entry = judge_entry(example, described.name)
        if entry is not None:
            judge.append({"label": described.label, "score": entry.get("score"),
                          "passed": entry.get("passed"), "reason": entry.get("unscored_reason"),
                          "reply": entry.get("raw_reply")})
    scores = [] if blind else [{"label": m.label, "value": m.value(example)} for m in METRICS
                               if m.headline and m.value(example) is not None]
    return {"id": example["id"], "question": example.get("question"),
            "reference": example.get("reference_answer"), "answer": example.get("generated_answer"),
            "context": context, "judge": judge, "blind": blind, "scores": scores}


# ---------------------------------------------------------------- a run opened for labelling

@dataclass
class Labelling:
    """A run opened for labelling: its report, the sample, the labels file and the session."""

    report: RunReport
    params_path: str
    sample: Sample
    labels: LabelsFile
    session: Session
    blind: bool
    contexts: dict[str, str]  # each example's context, from the run's canonical table

    @property
    def kind(self) -> str:
        return self.session.kind

    @property
    def calibrate_kind(self) -> str:
        """The labels' kind as 06_calibrate reads it (--label-kind)."""
        return CALIBRATE_KIND[self.kind]

    def view(self) -> dict[str, Any] | None:
        """The card of the example shown; None when every example of the sample is labelled."""
        if self.session.current is None:
            return None
        example = next(e for e in self.report.examples if e["id"] == self.session.current)
        return example_view(example, self.contexts.get(example["id"]), self.report, self.blind)

    def describe(self) -> str:
        """Where the labels go, who labels, how the sample was chosen, and how far the rater got."""
        mine = len(self.session.given)
        return "\n".join([
            f"run:     {self.report.location}",
            f"labels:  {self.labels.path} ({'exists' if self.labels.path.exists() else 'made at the first label'})",
            f"rater:   {self.labels.rater} ({mine} of the sample labelled before, {self.kind} labels: "
            f"{', '.join(KINDS[self.kind])})",
            f"sample:  {self.sample.describe()}",
            "Labelling needs JupyterLab (or Jupyter Notebook 7) to click in: executed by Papermill or nbconvert, "
            "this notebook shows the first example and writes nothing."])

    def calibrate_command(self) -> str:
        """The command line that calibrates this run against these labels, as `make calibrate`."""
        return (f"make calibrate RUN={self.report.run_id} LABELS={self.labels.path} "
                f"ARGS='--label-kind {self.calibrate_kind}'")


def _contexts(location: str) -> dict[str, str]:
    """Each example's context from the run's canonical.parquet (beside its report); empty when the
    run folder does not hold it."""
    try:
        table = pd.read_parquet(io.BytesIO(read_bytes(f"{location.removesuffix('.json')}/{CANONICAL}")),
                                columns=["id", "context"])
    except (StorageError, OSError, ValueError, KeyError):
        return {}
    return {str(i): str(c) for i, c in zip(table["id"], table["context"]) if isinstance(c, str) and c}


SHOWN_RUNS = 20  # the runs 07_label offers to label instead, newest first


def runs_to_label(params_path: str) -> list[tuple[str, str]]:
    """The successful runs of the profile's env on its local outputs root that 07_label may label,
    newest first (at most SHOWN_RUNS), each as (what a person reads, its run id)."""
    profile = load_profile(locate_profile(params_path))
    records = [record for record in collect_run_records(local_outputs_root(profile))
               if record.env == profile["env"] and record.status == "succeeded" and record.report]
    runs = []
    for record in records[:SHOWN_RUNS]:
        dataset = ((record.headline or {}).get("dataset") or {}).get("name")
        started = record.started_at.strftime("%Y-%m-%d %H:%M UTC")
        runs.append((f"{record.run_id[:8]} · {started}" + (f" · {dataset}" if dataset else ""), record.run_id))
    return runs


def open_labelling(params_path: str, run: str | None, labels_path: str | None, rater: str | None, label_kind: str,
                   n: int, seed: int, blind: bool) -> Labelling:
    """Open a run (id, prefix, report path or URL; None: the latest successful run of the
    profile's env) for `rater` (None: this machine's user name) to label `n` of its examples into
    `labels_path` (None: the run's labels file under the local outputs root,
    `<env>/labels/<run id>.csv`). It reads; nothing is written until a label is given."""
    check_kind(label_kind)
    rater = rater if rater is not None else getpass.getuser()
    profile = load_profile(locate_profile(params_path))
    local_root = local_outputs_root(profile)
    location = run_to_calibrate(local_root, run, profile["env"])
    report = read_report(location)
    labels = LabelsFile(labels_path or labels_file(local_root, profile["env"], report.run_id), rater)
    name, why = stratify_metric(report, n)
    sample = stratified_sample([(e["id"], v) for e, v in zip(report.examples, report.values(name))],
                               n, seed, name, why)
    if not sample.ids:
        raise LabellingError(f"run {report.run_id} has no example with a {registered(name).label} to label")
    return Labelling(report=report, params_path=params_path, sample=sample, labels=labels,
                     session=Session.start(sample, labels, label_kind), blind=blind, contexts=_contexts(location))
