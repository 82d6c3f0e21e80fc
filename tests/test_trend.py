"""The trend: headlines, series, real steps and what changed (lib/evalbook/trend/)."""

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from evalbook.layout import EXAMPLE_VALUES, HEADLINE_FILE, TREND_FILE, TREND_PAGE
from evalbook.publish.catalog import collect_runs
from evalbook.publish.index import build_index
from evalbook.publish.trend import build_trend_page
from evalbook.runs import read_run
from evalbook.stats import bootstrap_mean_ci
from evalbook.trend import document as trend_document
from evalbook.trend.document import build_trend
from evalbook.trend.headline import write_headline
from evalbook.trend.series import NOISE, NOT_PAIRED, REAL, StepSettings, TrendError

START = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
N = 32


def f1_values(seed: int = 1, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.4, 0.9, size=n)


def report(run_id: str, f1: np.ndarray, *, ids: list[str] | None = None, dataset: str = "sample",
           judge_label: str | None = None, model: str = "st-model", overrides: dict | None = None,
           commit: str = "a" * 40) -> dict:
    """A report as 04 writes it, reduced to what the headline reads: each example's F1 and
    cosine, their intervals, and a judge's groundedness when `judge_label` is given."""
    ids = ids or [f"q{i:02d}" for i in range(len(f1))]
    cosine = f1 * 0.9
    examples = []
    for example_id, f, c in zip(ids, f1, cosine):
        example = {"id": example_id, "question": f"question {example_id}",
                   "answer_similarity": {"bertscore": {"f1": float(f), "precision": float(f), "recall": float(f)},
                                         "sentence_cosine": float(c)},
                   "retrieval": None, "judge": None}
        if judge_label:
            example["judge"] = {"status": "judged", "groundedness": {"score": float(f)}}
        examples.append(example)

    def interval(values):
        low, high = bootstrap_mean_ci(values, resamples=200, seed=0, confidence=0.95)
        return {"mean": float(np.mean(values)), "low": low, "high": high, "n": len(values), "n_missing": 0}

    metrics = {"bertscore_f1": interval(f1), "sentence_cosine": interval(cosine)}
    judge = {"status": "not_run", "label": None, "reason": "not asked", "metrics": {}}
    if judge_label:
        metrics["groundedness"] = interval(f1)
        judge = {"status": "ran", "label": judge_label, "reason": None,
                 "metrics": {"groundedness": {"mean": float(np.mean(f1)), "pass_rate": 0.5, "threshold": 0.5,
                                              "n_scored": len(f1)}}}
    return {"schema_version": "1.10", "run_id": run_id, "timestamp": "2026-11-20T09:00:00Z",
            "dataset": {"name": dataset, "split": "test", "n_examples": len(f1)},
            "models": {"generator": "gen", "bertscore": model, "sentence_transformer": model},
            "retrieval_summary": {"top_k_match_rate": None, "mrr_at_k": None, "precision_at_k": None,
                                  "recall_at_k": None, "ndcg_at_k": None, "k": 5, "n": 0, "n_missing": len(f1)},
            "judge_summary": judge,
            "intervals": {"resamples": 200, "seed": 0, "confidence": 0.95, "method": "bootstrap", "metrics": metrics},
            "provenance": {"git_commit": commit, "params_hash": "sha256:0", "bertscore_num_layers": 6,
                           "params_profile": {"name": "default", "version": 2, "overrides": overrides or {}},
                           "inputs_sha256": {"input_path": "1" * 64, "predictions_path": "2" * 64}},
            "examples": examples}


def make_run(root: Path, position: int, doc: dict, *, params: dict | None = None, headline: bool = True) -> Path:
    """A run folder that ended `position` hours after START, with run.json, its report beside it,
    its params.yaml and, unless `headline` is False, its headline.json and values.parquet."""
    started = START + timedelta(hours=position)
    run_dir = root / "local" / "eval-runs" / f"{started:%Y}" / f"{started:%m}" / f"{started:%d}" / doc["run_id"]
    run_dir.mkdir(parents=True)
    overrides = doc["provenance"]["params_profile"]["overrides"]
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": doc["run_id"], "status": "succeeded", "started_at": started.isoformat(),
        "finished_at": started.isoformat(), "stages": [], "git_commit": doc["provenance"]["git_commit"],
        "params_profile": {"name": "default", "version": 2, "overrides": overrides}}))
    (run_dir / "params.yaml").write_text(yaml.safe_dump(params or {"seed": 0, "retrieval": {"k": 5}}))
    (run_dir.parent / f"{doc['run_id']}.json").write_text(json.dumps(doc))
    if headline:
        record = read_run(run_dir)
        write_headline(record, record.report_data)
    return run_dir


def run_id(n: int) -> str:
    return f"{n:08d}-0000-4000-8000-000000000000"


def steps_of(document: dict, kind: str = "scoring", metric: str = "bertscore_f1") -> list:
    [series] = [s for s in document["series"] if s["kind"] == kind]
    return [point["steps"].get(metric) for point in series["points"]]


def test_a_planted_regression_of_005_in_f1_on_32_paired_examples_is_real(tmp_path):
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1))
    make_run(tmp_path, 1, report(run_id(2), f1 - 0.05 + np.random.default_rng(2).normal(0, 0.01, N)))
    step = steps_of(build_trend(tmp_path))[1]
    assert step["status"] == REAL and step["n"] == N
    assert step["delta"] == pytest.approx(-0.05, abs=0.01) and step["high"] < 0


def test_two_runs_of_the_same_answers_make_no_real_step(tmp_path):
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1))
    make_run(tmp_path, 1, report(run_id(2), f1.copy()))
    # a rerun's float rounding, all one way but below the comparison's tolerance of 1e-6
    make_run(tmp_path, 2, report(run_id(3), f1 + 5e-8 + np.random.default_rng(3).normal(0, 1e-9, N)))
    steps = steps_of(build_trend(tmp_path))
    assert [s["status"] for s in steps[1:]] == ["within noise", "within noise"]


def test_a_step_with_no_shared_examples_is_not_paired_and_never_real(tmp_path):
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1))
    other_ids = [f"other-{i}" for i in range(N)]
    make_run(tmp_path, 1, report(run_id(2), f1 - 0.3, ids=other_ids))
    step = steps_of(build_trend(tmp_path))[1]
    assert step["status"] == NOT_PAIRED and step["n"] == 0 and step["delta"] is None


def test_fewer_shared_examples_than_min_paired_is_not_paired(tmp_path):
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1))
    ids = [f"q{i:02d}" for i in range(9)] + [f"new-{i}" for i in range(N - 9)]
    make_run(tmp_path, 1, report(run_id(2), f1 - 0.3, ids=ids))
    assert steps_of(build_trend(tmp_path))[1]["status"] == NOT_PAIRED
    assert steps_of(build_trend(tmp_path, settings=StepSettings(min_paired=9)))[1]["status"] == REAL
    with pytest.raises(TrendError, match="min_paired"):
        StepSettings(min_paired=0)


def test_a_different_judge_label_starts_a_new_judge_line(tmp_path):
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1, judge_label="judge-A"))
    make_run(tmp_path, 1, report(run_id(2), f1 - 0.1, judge_label="judge-A"))
    make_run(tmp_path, 2, report(run_id(3), f1 - 0.2, judge_label="judge-B"))
    document = build_trend(tmp_path)
    scoring = [s for s in document["series"] if s["kind"] == "scoring"]
    judges = {s["judge_label"]: s for s in document["series"] if s["kind"] == "judge"}
    assert len(scoring) == 1 and [p["run_id"] for p in scoring[0]["points"]] == [run_id(1), run_id(2), run_id(3)]
    assert set(judges) == {"judge-A", "judge-B"}
    assert [p["run_id"] for p in judges["judge-A"]["points"]] == [run_id(1), run_id(2)]
    assert [p["run_id"] for p in judges["judge-B"]["points"]] == [run_id(3)]
    assert judges["judge-A"]["metrics"] == ["groundedness"]
    assert judges["judge-A"]["points"][1]["steps"]["groundedness"]["status"] == REAL
    assert judges["judge-B"]["points"][0]["steps"] == {}  # never joined to judge-A's line
    # the judge's label is named among what changed on the scoring line
    assert "judge: judge-A → judge-B" in scoring[0]["points"][2]["changed"]


def test_another_dataset_or_scoring_model_is_another_series(tmp_path):
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1))
    make_run(tmp_path, 1, report(run_id(2), f1, dataset="other"))
    make_run(tmp_path, 2, report(run_id(3), f1, model="another-model"))
    make_run(tmp_path, 3, report(run_id(4), f1))
    document = build_trend(tmp_path)
    lines = sorted([p["run_id"] for p in s["points"]] for s in document["series"])
    assert lines == [[run_id(1), run_id(4)], [run_id(2)], [run_id(3)]]
    only = build_trend(tmp_path, dataset="other")
    assert [s["dataset"] for s in only["series"]] == ["other"] and only["left_out"] == {"another dataset": 3}


def test_what_changed_names_the_override_the_parameters_and_the_commit(tmp_path):
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1), params={"seed": 0, "retrieval": {"k": 5}})
    make_run(tmp_path, 1, report(run_id(2), f1 - 0.05, overrides={"predictions_path": "/data/truncated.jsonl"},
                                 commit="b" * 40), params={"seed": 1, "retrieval": {"k": 5}})
    [series] = build_trend(tmp_path)["series"]
    assert series["points"][0]["changed"] is None
    assert series["points"][1]["changed"] == ["-p predictions_path: not set → truncated.jsonl", "seed: 0 → 1",
                                              f"git commit: {'a' * 12} → {'b' * 12}"]


def test_since_keeps_the_later_points_and_their_steps(tmp_path):
    f1 = f1_values()
    for position in range(3):
        make_run(tmp_path, position * 24, report(run_id(position + 1), f1 - 0.05 * position))
    [series] = build_trend(tmp_path, since="2026-11-21")["series"]
    assert [p["run_id"] for p in series["points"]] == [run_id(2), run_id(3)]
    assert series["points"][0]["steps"]["bertscore_f1"]["status"] == REAL  # its step from the run before
    with pytest.raises(TrendError, match="YYYY-MM-DD"):
        build_trend(tmp_path, since="21/11/2026")


def test_steps_already_worked_out_are_taken_from_the_previous_trend(tmp_path, monkeypatch):
    # judged runs: each pair of runs is a step of the scoring line and of the judge's line
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1, judge_label="judge-A"))
    make_run(tmp_path, 1, report(run_id(2), f1 - 0.05, judge_label="judge-A"))
    build_trend_page(tmp_path, tmp_path)
    first = json.loads((tmp_path / TREND_FILE).read_text())
    assert {s["kind"] for s in first["series"]} == {"scoring", "judge"}
    read = []
    monkeypatch.setattr(trend_document, "read_values", lambda headline: read.append(headline["run_id"]) or None)
    build_trend_page(tmp_path, tmp_path)
    assert read == [] and json.loads((tmp_path / TREND_FILE).read_text())["series"] == first["series"]
    make_run(tmp_path, 2, report(run_id(3), f1, judge_label="judge-A"))
    document = build_trend(tmp_path, previous=first)
    assert read == [run_id(2), run_id(3)]  # only the new step's two runs are read, once for both lines
    assert steps_of(document)[2]["status"] == NOT_PAIRED  # their values were not readable here
    assert steps_of(document, "judge", "groundedness")[2]["status"] == NOT_PAIRED
    assert steps_of(document)[1]["status"] == REAL  # reused as it was
    # other settings: nothing is reused
    build_trend(tmp_path, previous=first, settings=StepSettings(min_paired=5))
    assert read[2:] == [run_id(1), run_id(2), run_id(3)]


def test_an_old_run_gets_its_headline_once_and_then_the_index_reads_no_report(tmp_path):
    f1 = f1_values()
    run_dir = make_run(tmp_path, 0, report(run_id(1), f1), headline=False)
    assert not (run_dir / HEADLINE_FILE).exists()
    build_index(tmp_path)
    headline = json.loads((run_dir / HEADLINE_FILE).read_text())
    assert headline["metrics"]["bertscore_f1"]["mean"] == pytest.approx(f1.mean())
    values = pd.read_parquet(run_dir / EXAMPLE_VALUES)
    assert values["bertscore_f1"].tolist() == pytest.approx(f1.tolist()) and len(values) == N
    # from now on the report is never read: the index still shows the run's means without it
    (run_dir.parent / f"{run_id(1)}.json").write_text("{not json")
    [row] = collect_runs(tmp_path)
    assert row["status"] == "succeeded" and row["metrics"]["bertscore_f1"] == pytest.approx(f1.mean())


def test_a_run_that_has_not_ended_gets_no_headline(tmp_path):
    run_dir = tmp_path / "local" / "eval-runs" / "2026" / "11" / "20" / run_id(1)
    run_dir.mkdir(parents=True)
    (run_dir / "RUNNING").write_text("{}")
    document = build_trend(tmp_path)
    assert not (run_dir / HEADLINE_FILE).exists()
    assert document["series"] == [] and document["left_out"] == {"not ended": 1}


def test_the_page_and_the_index_show_the_real_step(tmp_path):
    f1 = f1_values()
    make_run(tmp_path, 0, report(run_id(1), f1))
    make_run(tmp_path, 1, report(run_id(2), f1 - 0.05, overrides={"predictions_path": "/data/truncated.jsonl"}))
    html, _ = build_trend_page(tmp_path, tmp_path)
    page = html.read_text()
    assert 'src="data:image/png;base64,' in page
    assert "BERTScore F1 worse: -0.050" in page and "-p predictions_path: not set → truncated.jsonl" in page
    assert "Latest run 00000002" in page and "(worse by 0.050)" in page
    # 2 metrics stepped once: the page says how many real steps chance alone would give
    assert ("about 5% of steps are still called real by chance: about 0 of the 2 metric steps judged here"
            in " ".join(page.split()))
    index = build_index(tmp_path).read_text()
    assert f'<a href="{TREND_PAGE}">Trend</a>' in index and "(worse by 0.050)" in index


def test_a_failed_run_gets_a_headline_with_its_status_and_stays_off_the_lines(tmp_path):
    run_dir = tmp_path / "local" / "eval-runs" / "2026" / "11" / "20" / run_id(1)
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": run_id(1), "status": "failed", "started_at": START.isoformat(), "finished_at": START.isoformat(),
        "stages": [], "git_commit": "c" * 40}))
    (run_dir / "FAILED").write_text("stage 02_score failed\nValueError: boom\n")
    document = build_trend(tmp_path)
    headline = json.loads((run_dir / HEADLINE_FILE).read_text())
    assert headline["status"] == "failed" and headline["reason"].startswith("stage 02_score failed")
    assert headline["metrics"] == {} and not (run_dir / EXAMPLE_VALUES).exists()
    assert document["series"] == [] and document["left_out"] == {"did not succeed": 1}


def test_the_page_of_500_runs_stays_under_500_kb_with_every_run_and_step_on_it(tmp_path):
    """500 runs in a scoring series and a judge series (the size `make bench-trend` measured at
    1.3 MB): each run's row, link, means and intervals, every step that is not within noise,
    and both figures, in under 500 KB."""
    import copy

    from evalbook.publish.pages import noinput_path
    from evalbook.publish.trend import render_trend

    f1 = f1_values()
    for n in range(3):
        make_run(tmp_path, n, report(run_id(n + 1), f1 - 0.02 * n, judge_label="judge-aaaa"))
    document = json.loads(build_trend_page(tmp_path, tmp_path)[1].read_text())
    rng = np.random.default_rng(7)
    for series in document["series"]:
        template = series["points"][-1]
        if "bertscore_f1" in series["metrics"]:  # four metrics, as the sample's scoring series has
            for name in ("bertscore_precision", "bertscore_recall"):
                series["metrics"].append(name)
                template["metrics"][name] = dict(template["metrics"]["bertscore_f1"])
                template["steps"][name] = dict(template["steps"]["bertscore_f1"])
        points = []
        for n in range(500):
            point = copy.deepcopy(template)
            point["run_id"] = run_id(1000 + n)
            point["started_at"] = (START + timedelta(hours=6 * n)).isoformat()
            folder = tmp_path / "runs" / point["run_id"]
            folder.mkdir(parents=True, exist_ok=True)  # one folder per run, in both series
            noinput_path(folder / "04_report.ipynb").write_text("page")
            point["folder"] = str(folder)
            for values in point["metrics"].values():
                shift = float(rng.normal(0, 0.02))
                values.update(mean=values["mean"] + shift, low=values["low"] + shift, high=values["high"] + shift)
            if n % 20:  # one step in 20 real, as `make bench-trend` found (183 of 3,146)
                for step in point["steps"].values():
                    step.update(status=NOISE, delta=0.001, low=-0.01, high=0.012)
            points.append(point)
        series["points"], series["n_runs"] = points, len(points)
    page = render_trend(document, tmp_path)
    size = len(page.encode("utf-8"))
    assert size < 500 * 1024, f"trend.html is {size // 1024} KB at 500 runs"
    for n in (0, 250, 499):
        assert page.count(f">{run_id(1000 + n)[:8]}<") == 2  # its row in both series' tables
    assert page.count('src="data:image/png;base64,') == 2
