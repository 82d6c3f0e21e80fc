"""compare --pairwise: two runs' answers judged side by side, in both orders, against scripted
judges on 127.0.0.1 (evalbook.compare.pairwise), and end to end on the session's two sample runs
(the sample's answers against the truncated ones)."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from scipy.stats import binomtest

from evalbook.compare import ComparisonError
from evalbook.compare.document import validate_comparison
from evalbook.compare.pairwise import JudgeUnreachable, NothingJudged, judge_pairwise, plan_pairwise, select_pairs
from evalbook.compare.tables import pairwise_html
from evalbook.judge.estimate import OverBudget
from evalbook.layout import FAILED_MARKER, comparisons_folder
from evalbook.replycache import ReplyCache
from faultserver import FaultServer
from paths import ROOT

BLOCKS = re.compile(r"<<<(ANSWER_[12])\n(.*?)\n\1>>>", re.DOTALL)
IDS = [f"q{i}" for i in range(6)]


def report(answers: dict[str, str | None], questions: dict[str, str] | None = None) -> dict:
    return {"examples": [{"id": i, "question": (questions or {}).get(i, f"Question {i}?"), "generated_answer": a}
                         for i, a in answers.items()]}


BASELINE = report({i: f"Short answer {i}." for i in IDS})
CANDIDATE = report({i: f"MARKER full answer {i}." for i in IDS})


def first_slot(body) -> str:
    return json.dumps({"reasoning": "The first one reads better.", "verdict": "1"})


def marker(body) -> str:
    answers = dict(BLOCKS.findall(body["messages"][-1]["content"]))
    return json.dumps({"reasoning": "It carries the marker.", "verdict": "1" if "MARKER" in answers["ANSWER_1"] else "2"})


@pytest.fixture
def config(default_judge_config) -> dict:
    return {**default_judge_config, "sample_size": None}


def never_json(body) -> str:
    return "yes."


def judged(tmp_path: Path, config: dict, script, baseline=BASELINE, candidate=CANDIDATE):
    """The pairwise section, the server's chat calls and the plan's estimate."""
    with FaultServer(reply=script) as server:
        config = {**config, "base_url": server.base_url}
        plan = plan_pairwise(baseline, candidate, config, ReplyCache(tmp_path / "judge.sqlite"))
        section = judge_pairwise(plan)
        return section, server.chat_calls, plan.planned


def test_a_judge_that_always_picks_the_first_slot_gives_every_pair_inconsistent(tmp_path, config):
    section, calls, planned = judged(tmp_path, config, first_slot)
    assert calls == planned["calls"] == 2 * len(IDS) == section["calls"]["made"]
    assert planned["requests_by_metric"] == {"pairwise": 2 * len(IDS)}
    assert section["outcomes"] == {"A": 0, "B": 0, "tie": 0, "inconsistent": len(IDS), "invalid": 0}
    bias = section["position_bias"]
    assert bias["consistency"] == 0.0 and bias["first_slot_rate"] == 1.0
    assert bias["first_slot_p_value"] == pytest.approx(binomtest(12, 12, 0.5).pvalue)
    assert bias["first_slot_interval"]["low"] > 0.5  # the interval against 0.5 shows the bias
    assert section["win_rate_b"] is None and section["sign_test"] is None  # no pair decided: no win rate
    assert {pair["preferred"] for pair in section["pairs"]} == {"neither"}


def page_words(section: dict) -> str:
    """The words of 05's pairwise fragment for `section`, tags left out."""
    text = pairwise_html({"pairwise": section, "parameters": {"confidence": 0.95}})
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def test_the_page_says_a_first_slot_judges_preferences_are_position_bias_alone(tmp_path, config):
    """Issue 47: it read 'win rate is 0.500 [0.500, 0.500]', a certain tie made of the slot."""
    section, _, _ = judged(tmp_path, config, first_slot)
    words = page_words(section)
    assert f"No question was decided consistently: on all {len(IDS)} judgments the two orders disagreed" in words
    assert "position bias alone" in words and "no win rate" in words
    assert "win rate is" not in words and "[0.500, 0.500]" not in words


def test_summary_md_and_the_figure_say_a_first_slot_judges_preferences_are_position_bias_alone(tmp_path, config):
    """summary.md said 'No pair could be judged: every reply was invalid or failed (0 invalid)', and
    the figure was left out, where the position bias is all there is to show."""
    from evalbook.compare.figures import position_bias_figure
    from evalbook.publish.summary import comparison_summary_md
    from test_compare import compare, make_report, seeded_scores

    section, _, _ = judged(tmp_path, config, first_slot)
    scores = seeded_scores(12)
    baseline, candidate = make_report(scores), make_report(scores, tag="cand")
    summary = comparison_summary_md({**compare(baseline, candidate), "pairwise": section}, baseline, candidate, [])
    assert f"on all {len(IDS)} judgments the two orders disagreed" in summary and "position bias alone" in summary
    assert "every reply was invalid" not in summary and "the answer shown first won 1.000" in summary
    figure = position_bias_figure(section)
    assert [label.get_text() for label in figure.axes[0].get_yticklabels()] == [
        "orders agree (0 consistent)", f"first slot wins ({2 * len(IDS)} verdicts)"]


def test_the_page_says_when_the_win_rates_interval_has_no_width(tmp_path, config):
    section, _, _ = judged(tmp_path, config, marker)
    words = page_words(section)
    assert "win rate is 1.000 [1.000, 1.000]" in words
    assert f"Every one of the {len(IDS)} questions scored 1.000, so the interval has no width" in words


def test_a_judge_that_follows_the_marker_is_consistent_and_names_the_candidate(tmp_path, config):
    section, _, _ = judged(tmp_path, config, marker)
    assert section["outcomes"]["B"] == len(IDS) and section["position_bias"]["consistency"] == 1.0
    assert section["position_bias"]["first_slot_rate"] == 0.5
    assert section["win_rate_b"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": len(IDS)}
    assert section["sign_test"] == {"n": 6, "b_wins": 6, "p_value": pytest.approx(2 * 0.5 ** 6)}
    assert section["pairs"][0]["judgments"][0]["ab"] == {"verdict": "2", "reasoning": "It carries the marker.",
                                                         "problem": None}


def test_a_rerun_makes_no_call_and_gives_the_same_section(tmp_path, config):
    with FaultServer(reply=marker) as server:
        config = {**config, "base_url": server.base_url}
        first = judge_pairwise(plan_pairwise(BASELINE, CANDIDATE, config, ReplyCache(tmp_path / "judge.sqlite")))
        server.reply = first_slot  # a call made now would show in the outcomes
        plan = plan_pairwise(BASELINE, CANDIDATE, config, ReplyCache(tmp_path / "judge.sqlite"))
        again = judge_pairwise(plan)
        assert server.chat_calls == 2 * len(IDS)
    assert plan.planned["calls"] == 0 and plan.planned["cached"] == 2 * len(IDS)
    strip = lambda section: {k: v for k, v in section.items() if k not in ("calls", "estimate")}
    assert strip(again) == strip(first) and again["calls"]["cached"] == 2 * len(IDS)
    assert again["calls"]["made"] == 0


def test_only_the_shared_questions_are_judged_and_the_rest_is_counted_by_side(tmp_path, config):
    baseline = report({"a": "x a", "b": "x b", "c": "x c", "d": "x d", "only-base": "x"})
    candidate = report({"b": "MARKER b", "c": "MARKER c", "d": "", "a": "MARKER a", "only-cand-1": "y",
                        "only-cand-2": "y"}, questions={"c": "Another question?"})
    section, calls, _ = judged(tmp_path, config, marker, baseline, candidate)
    selection = section["selection"]
    assert [pair["id"] for pair in section["pairs"]] == ["a", "b"] and calls == 4
    assert (selection["n_shared"], selection["n_judged"]) == (4, 2)
    assert selection["only_baseline_ids"] == ["only-base"]
    assert selection["only_candidate_ids"] == ["only-cand-1", "only-cand-2"]
    assert selection["question_differs_ids"] == ["c"] and selection["no_answer_ids"] == ["d"]


def test_two_runs_with_nothing_to_judge_are_refused_before_any_call(tmp_path, config):
    with FaultServer(reply=marker) as server:
        with pytest.raises(ComparisonError, match="no question to judge.*0 ids"):
            plan_pairwise(report({"a": "x"}), report({"b": "y"}), {**config, "base_url": server.base_url},
                          ReplyCache(tmp_path / "judge.sqlite"))
        assert server.chat_calls == 0


def counting_transport() -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A judge transport that records every request, the reachability check's too."""
    received: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        received.append(request)
        return httpx.Response(200, json={"object": "list", "data": [{"id": "judge", "object": "model"}]})

    return httpx.MockTransport(answer), received


@pytest.mark.parametrize("baseline, candidate", [
    (BASELINE, BASELINE),
    (report({"a": "Same.", "b": "Only the baseline answers.", "c": "Same too."}),
     report({"a": "Same.", "b": None, "c": "Same too.", "d": "Only in the candidate."})),
], ids=["a run with itself", "no differing pair"])
def test_runs_whose_shared_answers_are_the_same_are_refused_before_any_request(tmp_path, config, baseline, candidate):
    """Issue 47: a run compared with itself spent 2 calls a question on answers with nothing to prefer."""
    transport, received = counting_transport()
    with pytest.raises(ComparisonError, match="nothing to compare: the two runs give the same answer"):
        plan_pairwise(baseline, candidate, config, ReplyCache(tmp_path / "judge.sqlite"), http_transport=transport)
    assert received == []


def test_the_sample_size_draws_the_judge_stages_seeded_sample(config):
    chosen = select_pairs(BASELINE, CANDIDATE, {**config, "sample_size": 3, "sample_seed": 0})
    again = select_pairs(BASELINE, CANDIDATE, {**config, "sample_size": 3, "sample_seed": 0})
    assert len(chosen.judged) == 3 and chosen.judged == again.judged and len(chosen.not_sampled) == 3
    assert chosen.judged == sorted(chosen.judged, key=IDS.index)


def test_calls_over_the_budget_stop_before_the_first(tmp_path, config):
    with FaultServer(reply=marker) as server:
        with pytest.raises(OverBudget, match="12 calls"):
            plan_pairwise(BASELINE, CANDIDATE, {**config, "base_url": server.base_url, "max_calls": 11},
                          ReplyCache(tmp_path / "judge.sqlite"))
        assert server.chat_calls == 0


def test_no_judge_answering_is_said_before_any_call(tmp_path, config):
    with pytest.raises(JudgeUnreachable, match="no judge server reachable"):
        plan_pairwise(BASELINE, CANDIDATE, {**config, "base_url": "http://127.0.0.1:1/v1"},
                      ReplyCache(tmp_path / "judge.sqlite"))


def test_an_unparseable_reply_is_invalid_counted_and_kept_with_its_text(tmp_path, config):
    def first_question_unparseable(body) -> str:
        return never_json(body) if "Question q0?" in body["messages"][-1]["content"] else marker(body)

    section, _, _ = judged(tmp_path, {**config, "max_retries": 0}, first_question_unparseable)
    assert section["outcomes"]["invalid"] == 1 and section["outcomes"]["B"] == len(IDS) - 1
    assert section["win_rate_b"]["n"] == len(IDS) - 1
    judgment = section["pairs"][0]["judgments"][0]
    assert judgment["ab"]["verdict"] == "invalid" and "'yes.'" in judgment["ab"]["problem"]
    assert section["pairs"][0]["preferred"] is None


@pytest.mark.parametrize("mode, first", [("healthy", "q0#ab: not the JSON asked for: 'yes.'"),
                                         ("server_error", "q0#ab: the call failed: ")])
def test_a_judgment_whose_every_reply_is_invalid_scores_nothing_and_fails(tmp_path, config, mode, first):
    """Issue 47: it gave a section without a number, written as a success."""
    with FaultServer(mode, reply=never_json) as server:
        plan = plan_pairwise(BASELINE, CANDIDATE, {**config, "base_url": server.base_url, "max_retries": 0},
                             ReplyCache(tmp_path / "judge.sqlite"))
        with pytest.raises(NothingJudged) as raised:
            judge_pairwise(plan)
        assert server.chat_calls == 2 * len(IDS)
    message = str(raised.value)
    failed, unparsed = (2 * len(IDS), 0) if mode == "server_error" else (0, 2 * len(IDS))
    assert message.startswith(f"pairwise judging scored nothing: all {len(IDS)} judgments were invalid "
                              f"({failed} calls failed, {unparsed} replies not the JSON asked for)")
    assert f"; the first: {first}" in message and "\n" not in message


def test_repeats_are_judged_apart_and_their_agreement_is_shown(tmp_path, config):
    def two_marker_one_first(body) -> str:  # the seed is the profile's + the repeat
        return marker(body) if body["seed"] - config["seed"] < 2 else first_slot(body)

    section, calls, planned = judged(tmp_path, {**config, "repeats": 3}, two_marker_one_first)
    assert calls == planned["calls"] == 2 * 3 * len(IDS) and section["n_judgments"] == 3 * len(IDS)
    assert section["outcomes"]["B"] == 2 * len(IDS) and section["outcomes"]["inconsistent"] == len(IDS)
    assert section["repeat_agreement"] == {"n_questions": len(IDS), "n_unanimous": 0, "unanimous": 0.0}
    assert section["pairs"][0]["points_b"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert section["win_rate_b"]["mean"] == pytest.approx(2.5 / 3) and section["sign_test"]["b_wins"] == len(IDS)


# ---------------------------------------------------------------- end to end

def longer_wins(body) -> str:
    """Prefers the longer answer, and says so with markup a page must not run."""
    answers = dict(BLOCKS.findall(body["messages"][-1]["content"]))
    first, second = len(answers["ANSWER_1"]), len(answers["ANSWER_2"])
    verdict = "tie" if first == second else "1" if first > second else "2"
    return json.dumps({"reasoning": "<img src=x onerror=alert(1)> the longer one says more.", "verdict": verdict})


def compare_cli(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalbook", "compare", "--params", str(profile), *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)


@pytest.fixture(scope="module")
def pairwise_comparison(sample_runs, tmp_path_factory):
    """compare --pairwise on the sample (baseline) against its truncated answers (candidate)."""
    cache = tmp_path_factory.mktemp("pairwise") / "judge.sqlite"
    with FaultServer(reply=longer_wins) as server:
        done = compare_cli(sample_runs.profile, "--baseline", sample_runs.baseline.run_id, "--candidate",
                           sample_runs.candidate.run_id, "--pairwise", "-p", f"judge.base_url={server.base_url}",
                           "-p", f"judge.cache_path={cache}")
        calls = server.chat_calls
    assert done.returncode == 0, done.stderr[-3000:]
    path = Path(done.stdout.strip().splitlines()[-1])
    return json.loads(path.read_text("utf-8")), path.with_suffix(""), calls, done


@pytest.mark.slow
def test_compare_pairwise_finds_the_truncated_answers_worse(pairwise_comparison):
    doc, folder, calls, done = pairwise_comparison
    validate_comparison(doc)
    section = doc["pairwise"]
    n = section["selection"]["n_judged"]
    assert n == 5 and calls == 2 * n == section["estimate"]["calls"]  # the default profile's sample_size
    assert section["outcomes"]["A"] == n and section["win_rate_b"]["mean"] == 0.0
    assert section["position_bias"]["consistency"] == 1.0
    assert "pairwise judging: 10 calls to make" in done.stderr
    assert (folder / "figures" / "pairwise.png").is_file()
    summary = (folder / "summary.md").read_text("utf-8")
    assert "### Pairwise judging" in summary
    assert "The judge preferred the candidate on 0 of 5 questions and the baseline on 5" in summary


@pytest.mark.slow
def test_the_pairwise_page_leads_with_the_preference_and_escapes_the_reasoning(pairwise_comparison):
    doc, folder, _, _ = pairwise_comparison
    page = next(folder.glob("*.html"))
    text = page.read_text("utf-8")
    assert "<img src=x" not in text and html.escape("<img src=x onerror=alert(1)>") in text
    words = html.unescape(re.sub(r"<[^>]+>", " ", text))
    assert "The judge preferred the candidate on 0 of 5 questions and the baseline on 5" in re.sub(r"\s+", " ", words)
    assert "the answer shown first won" in words


@pytest.mark.slow
def test_a_pairwise_comparison_without_a_judge_fails_marked_and_writes_no_comparison(sample_runs, tmp_path):
    done = compare_cli(sample_runs.profile, "--baseline", sample_runs.baseline.run_id, "--candidate",
                       sample_runs.candidate.run_id, "--pairwise", "-p", "judge.base_url=http://127.0.0.1:1/v1",
                       "-p", f"judge.cache_path={tmp_path / 'judge.sqlite'}")
    assert done.returncode == 1 and "pairwise judging could not start" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (failed,) = [marker for marker in sample_runs.candidate.run_dir.parent.rglob(FAILED_MARKER)
                 if "pairwise judging could not start" in marker.read_text("utf-8")]
    assert not failed.parent.with_suffix(".json").exists()


@pytest.mark.slow
def test_a_pairwise_comparison_with_every_reply_invalid_fails_marked_and_writes_no_json(sample_runs, tmp_path):
    with FaultServer(reply=never_json) as server:
        done = compare_cli(sample_runs.profile, "--baseline", sample_runs.baseline.run_id, "--candidate",
                           sample_runs.candidate.run_id, "--pairwise", "-p", f"judge.base_url={server.base_url}",
                           "-p", "judge.max_retries=0", "-p", f"judge.cache_path={tmp_path / 'judge.sqlite'}")
        calls = server.chat_calls
    assert done.returncode == 1 and calls == 10, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    # the error's first line is its sentence (evalbook.execution.failure_sentence); the exception's own line follows
    assert "stage 05_compare failed: pairwise judging scored nothing: all 5 judgments were invalid" in done.stderr
    (reason,) = [line for line in done.stderr.splitlines() if line.startswith("NothingJudged: pairwise judging scored nothing")]
    assert reason.startswith("NothingJudged: pairwise judging scored nothing: all 5 judgments were invalid (0 "
                             "calls failed, 10 replies not the JSON asked for), so no answer was preferred; the "
                             "first: ") and reason.endswith("#ab: not the JSON asked for: 'yes.'")
    (failed,) = [marker for marker in sample_runs.candidate.run_dir.parent.rglob(FAILED_MARKER)
                 if "pairwise judging scored nothing" in marker.read_text("utf-8")]
    assert not failed.parent.with_suffix(".json").exists()


@pytest.mark.slow
def test_a_run_compared_with_itself_pairwise_is_refused_before_any_judge_call(sample_runs, tmp_path):
    comparisons = comparisons_folder(sample_runs.baseline.report_path)
    before = sorted(comparisons.rglob("*")) if comparisons.exists() else []
    with FaultServer(reply=marker) as server:
        done = compare_cli(sample_runs.profile, "--baseline", sample_runs.baseline.run_id, "--candidate",
                           sample_runs.baseline.run_id, "--pairwise", "-p", f"judge.base_url={server.base_url}",
                           "-p", f"judge.cache_path={tmp_path / 'judge.sqlite'}")
        calls = (server.chat_calls, server.models_calls)
    assert done.returncode == 2 and calls == (0, 0), done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("evalbook: pairwise judging has nothing to compare: the two runs give the same answer")
    assert (sorted(comparisons.rglob("*")) if comparisons.exists() else []) == before
