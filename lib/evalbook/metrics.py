"""The metric registry: one description of every metric evalbook reports.

Every consumer iterates `METRICS` (or `of_kind`) instead of keeping its own list of names: the
scorer's columns, the report's summaries, the figures' labels and colours, the comparison's rows
and the judge stage's metrics. A new metric is one entry here plus the code that computes it.

Each metric says where its per-example value sits in a report example (`example_path`) and where
its summary sits in the report (`summary_path`), so reading a report never needs a branch on a
metric's name. A check (evalbook.checks) is a metric too: its value is its outcome in the
example's list of `checks` (1 for a pass, 0 for a fail, none for an error), its summary the
check's pass rate with its Wilson interval in `checks_summary`. Colours are entries of seaborn's "colorblind" palette, written out so that this
module imports nothing heavy (it is read by the command line); a test checks them against
seaborn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

Kind = Literal["similarity", "retrieval", "judge", "check"]
# A check's value by the status of its outcome; an error, like a missing outcome, has none.
CHECK_VALUES = {"pass": 1.0, "fail": 0.0}


@dataclass(frozen=True)
class Metric:
    """How one metric is named, read, ranged, drawn and compared."""

    name: str
    kind: Kind
    label: str
    colour: str
    example_path: tuple[str, ...]  # keys from a report example to its value
    summary_path: tuple[str, ...]  # keys from the report to its summary
    value_range: tuple[float | None, float | None]  # (lowest, highest); None where unbounded
    mean_key: str | None = "mean"  # the summary's key for the run's mean; None: it has none
    # the summary's keys on the metric's scale, which the report schema bounds by value_range
    summary_statistics: tuple[str, ...] = ("mean", "p10", "p50", "p90")
    # the range with bert-score's baseline rescaling on, where it differs from value_range
    rescaled_range: tuple[float | None, float | None] | None = None
    higher_is_better: bool = True
    in_comparison: bool = True  # paired example by example in a comparison
    headline: bool = False  # among the numbers a reader sees first: the run index, worst examples
    # what a judge metric's judge reads: the answer (one request per example and metric, a module
    # of evalbook.judge) or the retrieved chunks (the context metrics, evalbook.judge.context)
    reads: Literal["answer", "retrieval"] = "answer"
    # a check's name among the outcomes at example_path (a list of {check, status, reason})
    check_name: str | None = None

    def label_at(self, k: Any) -> str:
        """The label with the run's k written in (`MRR@5`, `top-5 match`) for a retrieval metric
        when k is known; else the label."""
        if self.kind != "retrieval" or isinstance(k, bool) or not isinstance(k, int):
            return self.label
        return self.label.replace("@k", f"@{k}").replace("top-k", f"top-{k}")

    def value(self, example: dict[str, Any]) -> float | None:
        """The example's value as a float; None when it has none (not judged, no retrieval, the
        check not applied or in error)."""
        if self.kind == "judge":
            record = example.get("judge")
            if not isinstance(record, dict) or record.get("status") != "judged":
                return None
        node: Any = example
        for key in self.example_path:
            if not isinstance(node, dict) or node.get(key) is None:
                return None
            node = node[key]
        if self.check_name is not None:
            status = next((o.get("status") for o in node if isinstance(o, dict) and o.get("check") == self.check_name),
                          None) if isinstance(node, list) else None
            return CHECK_VALUES.get(status) if isinstance(status, str) else None
        return float(node)

    def summary(self, report: dict[str, Any]) -> dict[str, Any] | None:
        """The report's summary of this metric; None when the report has none (the judge did not
        run, or a report written before the metric existed)."""
        node: Any = report
        for key in self.summary_path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node if isinstance(node, dict) else None

    def mean(self, report: dict[str, Any]) -> Any:
        """The run's mean (a rate for top-k match) as the report gives it; None when absent, as
        in a report written before the metric existed."""
        summary = self.summary(report)
        return None if summary is None or self.mean_key is None else summary.get(self.mean_key)


# bert-score's baseline rescaling, (s - b) / (1 - b), keeps 1 at 1 but sends -1 below -1, as far
# as the baseline b is close to 1: a rescaled BERTScore has no floor.
RESCALED_BERTSCORE = (None, 1.0)
# The retrieval metrics share one grey: figures draw one metric per panel, and the palette has
# too few colours left for five more.
RETRIEVAL_COLOUR = "#949494"


def _similarity(name: str, label: str, colour: str, *path: str, headline: bool = False) -> Metric:
    return Metric(name, "similarity", label, colour, ("answer_similarity", *path),
                  ("answer_similarity_summary", name), (-1.0, 1.0), headline=headline)


def _bertscore(name: str, label: str, colour: str, part: str, headline: bool = False) -> Metric:
    return replace(_similarity(name, label, colour, "bertscore", part, headline=headline),
                   rescaled_range=RESCALED_BERTSCORE)


def _retrieval(name: str, label: str, summary_key: str, headline: bool = False) -> Metric:
    """A retrieval metric at the run's k, 0-1: its mean sits in retrieval_summary under
    `summary_key`, beside the k it was measured at."""
    return Metric(name, "retrieval", label, RETRIEVAL_COLOUR, ("retrieval", name), ("retrieval_summary",),
                  (0.0, 1.0), mean_key=summary_key, summary_statistics=(summary_key,), headline=headline)


def _judge(name: str, colour: str, lowest: float = 0.0) -> Metric:
    return Metric(name, "judge", name, colour, ("judge", name, "score"),
                  ("judge_summary", "metrics", name), (lowest, 1.0), headline=True)


def _context(name: str, colour: str) -> Metric:
    """A context metric: the judge's verdicts on the retrieved chunks, 0-1 (issue 39)."""
    return replace(_judge(name, colour), label=name.replace("_", " "), headline=False, reads="retrieval")


def _check(name: str, label: str, colour: str) -> Metric:
    """A check, 0-1: 1 where the example passed it, 0 where it failed; its mean is its pass rate
    over the examples that passed or failed, with its Wilson interval in the summary. A
    comparison pairs the checks in its own section (evalbook.compare.checks), so it is not in the
    paired deltas, and not among the headline numbers: the report shows the checks right after
    them."""
    return Metric(name, "check", label, colour, ("checks",), ("checks_summary", "checks", name), (0.0, 1.0),
                  mean_key="pass_rate", summary_statistics=("pass_rate",), in_comparison=False, check_name=name)


METRICS: tuple[Metric, ...] = (
    _bertscore("bertscore_f1", "BERTScore F1", "#0173b2", "f1", headline=True),
    _bertscore("bertscore_precision", "BERTScore precision", "#56b4e9", "precision"),
    _bertscore("bertscore_recall", "BERTScore recall", "#029e73", "recall"),
    _similarity("sentence_cosine", "sentence cosine", "#de8f05", "sentence_cosine", headline=True),
    # hit@k, named top_k_match since before the other retrieval metrics; its mean is a rate
    _retrieval("top_k_match", "top-k match", "top_k_match_rate", headline=True),
    _retrieval("mrr_at_k", "MRR@k", "mrr_at_k", headline=True),
    _retrieval("precision_at_k", "precision@k", "precision_at_k"),
    _retrieval("recall_at_k", "recall@k", "recall_at_k"),
    _retrieval("ndcg_at_k", "nDCG@k", "ndcg_at_k"),
    # A rank is missing where no relevant document was retrieved, so pairing ranks would skip
    # exactly the failures: the comparison pairs the metrics at k instead.
    Metric("rank", "retrieval", "retrieval rank", RETRIEVAL_COLOUR, ("retrieval", "rank"),
           ("retrieval_summary",), (1.0, None), mean_key=None, summary_statistics=(),
           higher_is_better=False, in_comparison=False),
    _judge("groundedness", "#d55e00"),
    _judge("relevance", "#cc78bc", lowest=-1.0),  # a cosine of question embeddings
    _judge("criteria", "#ca9161"),
    _context("context_relevance", "#fbafe4"),
    _context("context_precision", "#ece133"),
    # the palette's last colour; grey is otherwise the retrieval metrics', never drawn beside this
    _context("context_recall", "#949494"),
    # The palette's ten colours are taken; a check is drawn in no figure (its pass rate and
    # failures are tables), so it takes the grey of the metrics drawn apart from the scores.
    _check("facts", "fact check", RETRIEVAL_COLOUR),
)
BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}

# Per-example flags that come with the similarity scores: columns of the scored table beside
# the metrics, and `flags` of a report example when true.
SCORE_FLAGS = ("generated_empty", "reference_empty", "truncated_bertscore", "truncated_sentence")
# The scored table's column of question embeddings, while 02_score groups the questions into
# topics (evalbook.report.topics); it is not written into scored.parquet.
QUESTION_EMBEDDING = "question_embedding"


def of_kind(kind: Kind) -> tuple[Metric, ...]:
    return tuple(metric for metric in METRICS if metric.kind == kind)


def names(kind: Kind) -> tuple[str, ...]:
    return tuple(metric.name for metric in of_kind(kind))


def metric(name: str) -> Metric:
    """The registered metric; an unknown name is an error that lists the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"no metric {name!r}; known metrics: {', '.join(BY_NAME)}") from None
