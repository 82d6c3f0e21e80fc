"""A user's own input: nothing that describes the bundled sample carries over to it."""

from __future__ import annotations


import pytest

from evalbook.load import LoadError, load_evaluation_set
from evalbook.params import load_profile
from evalbook.pipeline import dataset_label
from paths import DEFAULT_PROFILE

pytestmark = pytest.mark.slow  # real runs through the runner



def test_overriding_the_input_drops_the_sample_s_predictions_name_split_and_generator(tmp_path):
    mine = tmp_path / "support-tickets.csv"
    profile = load_profile(DEFAULT_PROFILE, {"input_path": str(mine)})
    assert profile["predictions_path"] is None
    assert profile["dataset"] == {"name": None, "split": "test"}
    assert profile["generator"] is None
    assert dataset_label(profile) == {"name": "support-tickets", "split": "test"}


def test_what_the_user_gives_beside_the_input_is_kept(tmp_path):
    profile = load_profile(DEFAULT_PROFILE, {"input_path": str(tmp_path / "a.csv"), "generator": "rag-v2",
                                     "predictions_path": str(tmp_path / "p.jsonl"), "dataset.name": "tickets"})
    assert profile["generator"] == "rag-v2" and profile["dataset"]["name"] == "tickets"
    assert profile["predictions_path"] == str(tmp_path / "p.jsonl")


def test_a_profile_that_extends_the_default_with_its_own_input_does_not_inherit_the_sample(tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text(f"extends: {DEFAULT_PROFILE}\ninput_path: {tmp_path / 'mine.parquet'}\ngenerator: bot-7\n")
    profile = load_profile(own)
    assert profile["predictions_path"] is None and profile["dataset"]["name"] is None
    assert profile["generator"] == "bot-7"
    same_input = tmp_path / "same.yaml"
    same_input.write_text(f"extends: {DEFAULT_PROFILE}\nlimit: 4\n")
    assert load_profile(same_input)["generator"] == load_profile(DEFAULT_PROFILE)["generator"]


@pytest.mark.parametrize("source, name", [
    ("data/sample/examples.jsonl", "examples"),
    ("s3://bucket/runs/tickets.parquet", "tickets"),
    ("hf://datasets/owner/qa-set", "owner/qa-set"),
    ("hf://datasets/owner/qa-set/data/test-00000-of-00001.parquet", "owner/qa-set"),
])
def test_the_dataset_name_defaults_from_the_input(source, name):
    profile = load_profile(DEFAULT_PROFILE, {"input_path": source, "dataset.name": None})
    assert dataset_label(profile)["name"] == name


def test_answers_in_both_files_name_the_flag_that_fixes_it(tmp_path):
    examples = tmp_path / "mine.csv"
    examples.write_text("id,question,context,answer,generated_answer\na,q,c,r,g\n")
    predictions = tmp_path / "p.jsonl"
    predictions.write_text('{"id": "a", "generated_answer": "g"}\n')
    with pytest.raises(LoadError, match=r"-p predictions_path=null"):
        load_evaluation_set(str(examples), str(predictions))


def test_a_users_own_csv_runs_with_one_override_and_its_report_carries_the_csv_s_name(own_run):
    import json

    import nbformat

    _, report_path, _ = own_run
    report = json.loads(report_path.read_text("utf-8"))
    assert report["dataset"] == {"name": "helpdesk-eval", "split": "test", "n_examples": 4}
    assert report["models"]["generator"] == "unknown"
    assert report["answer_similarity_summary"]["bertscore_f1"]["n"] == 4
    assert report["counts"]["n_examples_without_prediction"] == 0
    assert report["counts"]["n_empty_generated_answers"] == 1
    assert "evalbook-sample" not in report_path.read_text("utf-8")
    # the check column is no metadata, and ran on the three rows that give it a cell
    assert all("check_contains_ignore_case" not in example["metadata"] for example in report["examples"])
    column_check = report["checks_summary"]["checks"]["check_contains_ignore_case"]
    assert (column_check["n"], column_check["n_passed"], column_check["n_failed"]) == (3, 2, 1)
    [failing] = [outcome for example in report["examples"] for outcome in example["checks"]
                 if outcome["check"] == "check_contains_ignore_case" and outcome["status"] == "fail"]
    assert failing["reason"] == "'carbon dioxide' not found in the answer"
    for notebook in sorted(report_path.with_suffix("").glob("0*.ipynb")):
        stderr = [output.get("text", "") for cell in nbformat.read(notebook, 4).cells
                  for output in cell.get("outputs", []) if output.get("name") == "stderr"]
        assert not stderr, f"{notebook.name} stores stderr (progress bars or warnings): {stderr}"
        kernel_noise = [output.get("text", "") for cell in nbformat.read(notebook, 4).cells
                        for output in cell.get("outputs", []) if "IPKernelApp" in output.get("text", "")]
        assert not kernel_noise, f"{notebook.name}: {kernel_noise}"


def test_the_no_code_report_opens_with_the_headline_numbers_and_their_intervals(own_run):
    import json

    from browser import first_screen

    folder, report_path, _ = own_run
    report = json.loads(report_path.read_text("utf-8"))
    seen = first_screen(report_path.with_suffix("") / "04_report.noinput.html")
    f1 = report["intervals"]["metrics"]["bertscore_f1"]
    cosine = report["intervals"]["metrics"]["sentence_cosine"]
    for expected in ("helpdesk-eval", "4 examples", "generator unknown", "95% interval", "BERTScore F1",
                     f"{f1['mean']:.3f}", f"[{f1['low']:.3f}, {f1['high']:.3f}]",
                     f"{cosine['mean']:.3f}", f"[{cosine['low']:.3f}, {cosine['high']:.3f}]",
                     "no judge ran", "1 empty answer ·"):
        assert expected in seen["above"], (expected, seen["above"][:600])
    assert "1 empty answers" not in seen["above"]
    assert "ConnectError" not in seen["above"]
    assert not seen["empty_tables"], seen["empty_tables"]
    assert str(folder) not in seen["text"]  # no absolute path
    assert "{'" not in seen["text"] and '{"' not in seen["text"]  # no raw dict


def test_the_generator_comes_from_a_generator_column_when_the_profile_names_none(tmp_path):
    from evalbook.pipeline import generator_of

    examples = tmp_path / "mine.jsonl"
    examples.write_text("".join(
        f'{{"id": "{i}", "question": "q{i}", "context": "c", "answer": "a", "generated_answer": "g", '
        f'"generator": "{name}"}}\n' for i, name in enumerate(["rag-v3", "rag-v3", "rag-v4"])))
    result = load_evaluation_set(str(examples), None)
    assert result.generators == ["rag-v3", "rag-v4"]
    profile = load_profile(DEFAULT_PROFILE, {"input_path": str(examples)})
    assert generator_of(profile, {"generators": result.generators}) == "rag-v3, rag-v4"
    assert generator_of(profile, {"generators": []}) == "unknown"
    named = load_profile(DEFAULT_PROFILE, {"input_path": str(examples), "generator": "prod"})
    assert generator_of(named, {"generators": result.generators}) == "prod"
    predictions = tmp_path / "p.jsonl"
    predictions.write_text('{"id": "0", "generated_answer": "g", "generator": "from-predictions"}\n')
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"id": "0", "question": "q", "context": "c", "answer": "a"}\n')
    assert load_evaluation_set(str(plain), str(predictions)).generators == ["from-predictions"]


def test_each_input_file_s_sha256_reaches_the_provenance(own_run):
    import hashlib
    import json

    folder, report_path, _ = own_run
    provenance = json.loads(report_path.read_text("utf-8"))["provenance"]
    digest = hashlib.sha256((folder / "helpdesk-eval.csv").read_bytes()).hexdigest()
    assert provenance["inputs_sha256"] == {"input_path": digest, "predictions_path": None}


def test_the_run_s_output_carries_no_kernel_warning(own_run):
    _, _, stderr = own_run
    assert "[IPKernelApp]" not in stderr, stderr  # no TCP warning, no KeyboardInterrupt at shutdown
    assert "Traceback" not in stderr


def test_a_missing_text_names_the_flag_that_skips_it(tmp_path):
    examples = tmp_path / "mine.jsonl"
    examples.write_text('{"id": "a", "question": "q", "context": null, "answer": "r", "generated_answer": "g"}\n'
                        '{"id": "b", "question": "q", "context": "c", "answer": "r", "generated_answer": "g"}\n')
    with pytest.raises(LoadError, match=r"-p skip_incomplete_examples=true skips and counts them"):
        load_evaluation_set(str(examples), None)
    assert len(load_evaluation_set(str(examples), None, skip_incomplete=True).table) == 1
