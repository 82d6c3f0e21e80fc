"""Stage context, write-once artifacts and the display helpers of pipeline.py (no models)."""

from dataclasses import FrozenInstanceError
from pathlib import Path

import pandas as pd
import pytest
import yaml

from evalbook.params import load_profile
from evalbook.pipeline import (StageError, canonical_table, dataset_label,
                               open_stage, scored_table, show_figure, summary_frame)

RUN_ID = "3b7e2f10-5c4d-4a8b-9e6f-0d1c2b3a4f5e"


@pytest.fixture
def profile_path(relocated_default_values, write_profile):
    return write_profile(relocated_default_values)


def test_interactive_stage_uses_the_scratch_folder(profile_path, tmp_path):
    ctx = open_stage(str(profile_path))
    assert ctx.interactive
    assert ctx.run_dir == tmp_path / "outputs" / "local" / "interactive"
    assert ctx.report_path == ctx.run_dir / "report.json"


def test_run_stage_needs_an_existing_folder_and_a_run_id(profile_path, tmp_path):
    with pytest.raises(StageError, match="does not exist; the runner creates it"):
        open_stage(str(profile_path), run_dir=str(tmp_path / "missing"), run_id=RUN_ID)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(StageError, match="run_id is required"):
        open_stage(str(profile_path), run_dir=str(run_dir))
    ctx = open_stage(str(profile_path), run_dir=str(run_dir), run_id=RUN_ID)
    assert not ctx.interactive
    assert ctx.report_path == tmp_path / f"{RUN_ID}.json"


def test_run_artifacts_are_write_once_but_scratch_ones_are_not(profile_path, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ctx = open_stage(str(profile_path), run_dir=str(run_dir), run_id=RUN_ID)
    ctx.write_json("note.json", {"first": 1})
    with pytest.raises(FileExistsError):
        ctx.write_json("note.json", {"second": 2})
    assert ctx.read_json("note.json") == {"first": 1}
    scratch = open_stage(str(profile_path))
    scratch.write_json("note.json", {"first": 1})
    scratch.write_json("note.json", {"second": 2})
    assert scratch.read_json("note.json") == {"second": 2}


def test_run_stage_refuses_to_recompute_a_missing_upstream(profile_path, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ctx = open_stage(str(profile_path), run_dir=str(run_dir), run_id=RUN_ID)
    with pytest.raises(StageError, match="stage 01_load must run first"):
        canonical_table(ctx)
    with pytest.raises(StageError, match="stage 02_score must run first"):
        scored_table(ctx)
    assert not any(run_dir.iterdir())


def test_an_interactive_scored_table_scores_with_the_profile_s_engine(profile_path, monkeypatch):
    """02_score's fallback in a notebook opened alone: `engine: ray` sends the rows to Ray, as
    02_score itself does, and the driver loads no model (the Ray entry point is replaced here;
    tests/test_engines.py runs the same fallback on a real Ray)."""
    from evalbook.score import engines, scoring

    class SentToRay(Exception):
        pass

    sent = []

    def run_on_ray(frame, profile, *arguments, **options):
        sent.append((len(frame), profile["engine"]))
        raise SentToRay

    def no_model_in_the_driver(*arguments, **options):
        raise AssertionError("the driver loaded a model")

    monkeypatch.setattr(engines, "run_on_ray", run_on_ray)
    monkeypatch.setattr(scoring, "TokenEncoder", no_model_in_the_driver)
    values = yaml.safe_load(profile_path.read_text())
    profile_path.write_text(yaml.safe_dump({**values, "engine": "ray", "limit": 5}))
    ctx = open_stage(str(profile_path))
    with pytest.raises(SentToRay):
        scored_table(ctx)
    assert sent == [(5, "ray")]
    assert not ctx.artifact("scored.parquet").exists()


def test_a_report_refuses_scores_from_models_other_than_the_run_s(profile_path, tmp_path):
    """provenance.json names the models the run started with; scoring.json must match them."""
    from evalbook.pipeline import _scored_models

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ctx = open_stage(str(profile_path), run_dir=str(run_dir), run_id=RUN_ID)
    recorded = {"bertscore_hash": "h", "bertscore_num_layers": 6,
                "weights_sha256": {"bertscore": "a", "sentence_transformer": "b"}}
    assert _scored_models(ctx, recorded, {**recorded, "device": "cpu"}) == recorded
    assert _scored_models(ctx, {}, recorded) == recorded, "a provenance.json from before the models"
    replaced = {**recorded, "weights_sha256": {"bertscore": "c", "sentence_transformer": "b"}}
    with pytest.raises(StageError, match=r"scoring.json: weights_sha256 is .*'c'.*provenance.json "
                                         r"records .*'a'.*the models changed during the run"):
        _scored_models(ctx, recorded, replaced)


def test_interactive_stage_computes_a_missing_upstream(profile_path):
    ctx = open_stage(str(profile_path))
    table = canonical_table(ctx)
    assert len(table) >= 30 and (ctx.run_dir / "canonical.parquet").exists()


@pytest.mark.parametrize(("name", "input_path", "expected"), [
    (None, "hf://datasets/neural-bridge/rag-dataset-12000", "neural-bridge/rag-dataset-12000"),
    (None, "data/mine/eval.parquet", "eval"),
    ("my-set", "data/mine/eval.parquet", "my-set"),
])
def test_dataset_label(profile_path, name, input_path, expected):
    profile = load_profile(profile_path, {"dataset.name": name, "input_path": input_path})
    assert dataset_label(profile) == {"name": expected, "split": "test"}  # not the sample's split


def test_summary_frame_keeps_counts_integer_and_missing_as_na():
    frame = summary_frame({
        "bertscore_f1": {"mean": 0.5, "p10": 0.26, "p50": 0.5, "p90": 0.74, "n": 4, "n_missing": 1},
        "sentence_cosine": {"mean": None, "p10": None, "p50": None, "p90": None, "n": 0, "n_missing": 5},
    })
    assert frame["n"].tolist() == [4, 0] and str(frame["n"].dtype) == "int64"
    assert frame.loc["bertscore_f1", "p90"] == 0.74
    assert pd.isna(frame.loc["sentence_cosine", "mean"])


def test_show_figure_saves_a_png_or_prints_why_not(profile_path, tmp_path, capsys):
    from IPython.display import Image
    from matplotlib.figure import Figure

    from evalbook.report.figures import retrieval_rank_histogram

    ctx = open_stage(str(profile_path))
    drawn = Figure()
    drawn.subplots().plot([0, 1], [1, 0])
    shown = show_figure(ctx, {}, lambda report: drawn, "line")
    png = ctx.run_dir / "figures" / "line.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # What the notebook shows is the saved PNG itself, drawn once (a Figure would be drawn again
    # by the inline backend), at the inline backend's size: 100 of the file's 150 dots per inch.
    assert isinstance(shown, Image) and shown.data == png.read_bytes()
    width = int.from_bytes(png.read_bytes()[16:20], "big")
    assert shown.width == round(width * 100 / 150)
    show_figure(ctx, {}, lambda report: drawn, "line")  # the scratch folder replaces its figure
    run = open_stage(str(profile_path), run_dir=str(tmp_path), run_id=RUN_ID)
    show_figure(run, {}, lambda report: drawn, "line")
    with pytest.raises(FileExistsError):  # a run folder never does
        show_figure(run, {}, lambda report: drawn, "line")
    no_retrieval = {"examples": [{"id": "a", "retrieval": None}], "retrieval_summary": {"k": 5}}
    assert show_figure(run, no_retrieval, retrieval_rank_histogram, "ranks") is None
    assert "ranks: not drawn" in capsys.readouterr().out
    assert not (tmp_path / "figures" / "ranks.png").exists()


def test_stage_context_is_immutable(profile_path):
    ctx = open_stage(str(profile_path))
    run_id = ctx.run_id
    with pytest.raises(FrozenInstanceError):
        ctx.run_id = "other"  # type: ignore[misc]
    assert ctx.run_id == run_id
    with pytest.raises(FrozenInstanceError):  # nor can a stage repoint the profile it was given
        ctx.profile.source_path = profile_path.parent / "other.yaml"  # type: ignore[misc]
    assert ctx.profile.source_path == profile_path.resolve()
