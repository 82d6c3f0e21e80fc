"""Score generated answers against reference answers: BERTScore P/R/F1 and sentence cosine.

`AnswerScorer` loads each model once and reproduces `bert_score.score(..., idf=False)` and
`SentenceTransformer.encode` + cosine (mean pooling) to float precision, while running each
distinct token sequence through the model only once. When both metrics use the same model and
BERTScore reads its last layer, one forward pass serves both metrics. Truncation is respected
separately: bert-score cuts at the tokenizer's maximum (512 for BERT), SentenceTransformers at
the model's `max_seq_length` (256 for all-MiniLM-L6-v2), so a text longer than the smaller
limit gets a pass of its own for each.

`score_answers(frame, scorer, k)` is the batch function: DataFrame in, DataFrame out.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm as text_tqdm
from tqdm.auto import tqdm

from evalbook.models import ResolvedModel
from evalbook.retrieval import retrieval_columns
from evalbook.similarity import METRIC_COLUMNS, greedy_match, mean_pool, pairwise_cosine, rescale



class ScoringError(RuntimeError):
    """A scoring configuration that would give wrong or silently altered scores."""


def _sentence_transformer_config(folder: Path) -> int:
    """Check the folder is a mean-pooling SentenceTransformer and return its max_seq_length."""
    pooling_file = folder / "1_Pooling" / "config.json"
    config_file = folder / "sentence_bert_config.json"
    if not pooling_file.is_file() or not config_file.is_file():
        raise ScoringError(f"{folder} is not a SentenceTransformers model folder "
                           f"(needs 1_Pooling/config.json and sentence_bert_config.json)")
    pooling = json.loads(pooling_file.read_text("utf-8"))
    active = [key for key, value in pooling.items() if key.startswith("pooling_mode_") and value]
    if active != ["pooling_mode_mean_tokens"]:
        raise ScoringError(f"{pooling_file}: only mean pooling is supported, found {active}")
    config = json.loads(config_file.read_text("utf-8"))
    if config.get("do_lower_case"):
        raise ScoringError(f"{config_file}: do_lower_case is not supported")
    return int(config["max_seq_length"])


def read_baseline(path: str, num_layers: int) -> tuple[float, float, float]:
    """The (P, R, F) rescaling baseline of `num_layers` from a bert-score baseline TSV/CSV file."""
    baseline_file = Path(path)
    if not baseline_file.is_file():
        raise ScoringError(
            f"rescale_with_baseline is set but the baseline file {baseline_file} does not exist; "
            "bert-score would silently return unrescaled scores"
        )
    table = pd.read_csv(baseline_file)
    missing = {"LAYER", "P", "R", "F"} - set(table.columns)
    if missing:
        raise ScoringError(f"{baseline_file}: missing column(s) {sorted(missing)}")
    row = table[table["LAYER"] == num_layers]
    if len(row) != 1:
        raise ScoringError(f"{baseline_file}: no single row for LAYER {num_layers}")
    return tuple(float(row.iloc[0][c]) for c in ("P", "R", "F"))  # type: ignore[return-value]


@contextmanager
def quiet_weight_loading():
    """Hide transformers' weight-loading bar: loading takes a fraction of a second, and the bar
    would only clutter the notebook."""
    from transformers.utils import logging as transformers_logging

    bars_were_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars_were_on:
            transformers_logging.enable_progress_bar()


class TokenEncoder:
    """One transformer, loaded once, returning per-token hidden states of chosen layers."""

    def __init__(self, folder: Path, keep_layers: int | None = None):
        from transformers import AutoModel, AutoTokenizer

        self.folder = folder
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        with quiet_weight_loading():
            model = AutoModel.from_pretrained(str(folder))
        model.eval()
        total = model.config.num_hidden_layers
        keep_layers = total if keep_layers is None else keep_layers
        if not 1 <= keep_layers <= total:
            raise ScoringError(f"{folder}: num_layers must be between 1 and {total}, got {keep_layers}")
        # Layers above the deepest one read are never computed.
        model.encoder.layer = torch.nn.ModuleList(model.encoder.layer[:keep_layers])
        self.model = model
        self.n_layers_total = total
        self.special_ids = {self.tokenizer.cls_token_id, self.tokenizer.sep_token_id}

    def token_ids(self, texts: Sequence[str], max_length: int) -> list[list[int]]:
        encoded = self.tokenizer(list(texts), add_special_tokens=True, truncation=True,
                                 max_length=max_length, verbose=False)
        return encoded["input_ids"]

    def full_lengths(self, texts: Sequence[str]) -> list[int]:
        encoded = self.tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def hidden_states(self, sequences: Sequence[tuple[int, ...]], layers: Sequence[int],
                      batch_size: int, progress: tqdm | None = None) -> dict[tuple[int, ...], dict[int, np.ndarray]]:
        """Run each distinct sequence once; return {sequence: {layer: (n_tokens, dim) array}}."""
        ordered = sorted(set(sequences), key=len)
        pad_id = self.tokenizer.pad_token_id
        states: dict[tuple[int, ...], dict[int, np.ndarray]] = {}
        with torch.inference_mode():
            for start in range(0, len(ordered), batch_size):
                batch = ordered[start:start + batch_size]
                width = max(len(seq) for seq in batch)
                input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
                attention = torch.zeros((len(batch), width), dtype=torch.long)
                for row, seq in enumerate(batch):
                    input_ids[row, :len(seq)] = torch.tensor(seq)
                    attention[row, :len(seq)] = 1
                output = self.model(input_ids=input_ids, attention_mask=attention,
                                    output_hidden_states=True)
                for row, seq in enumerate(batch):
                    states[seq] = {layer: output.hidden_states[layer][row, :len(seq)].numpy()
                                   for layer in layers}
                if progress is not None:
                    progress.update(len(batch))
        return states


@dataclass
class ScoreProvenance:
    bertscore_hash: str
    bertscore_model: str
    bertscore_num_layers: int
    sentence_transformer_model: str
    bertscore_max_tokens: int
    sentence_max_tokens: int
    shared_forward_pass: bool
    weights_sha256: dict[str, str] = field(default_factory=dict)
    rescale_baseline: tuple[float, float, float] | None = None

    def as_dict(self) -> dict:
        return asdict(self)


class AnswerScorer:
    """BERTScore and sentence cosine with models loaded once; see the module docstring."""

    def __init__(self, bertscore: ResolvedModel, sentence_transformer: ResolvedModel,
                 num_layers: int, batch_size: int = 64, baseline_path: str | None = None,
                 rescale_with_baseline: bool = False):
        import bert_score

        self.batch_size = batch_size
        self.num_layers = num_layers
        self.sentence_max = _sentence_transformer_config(sentence_transformer.folder)
        self.shared = bertscore.folder.resolve() == sentence_transformer.folder.resolve()
        if self.shared:
            encoder = TokenEncoder(bertscore.folder)
            if num_layers > encoder.n_layers_total:
                raise ScoringError(f"{bertscore.folder}: num_layers must be at most "
                                   f"{encoder.n_layers_total}, got {num_layers}")
            self.bert_encoder = self.sentence_encoder = encoder
        else:
            self.bert_encoder = TokenEncoder(bertscore.folder, num_layers)
            self.sentence_encoder = TokenEncoder(sentence_transformer.folder)
        self.sentence_layer = self.sentence_encoder.n_layers_total
        tokenizer = self.bert_encoder.tokenizer
        # bert-score truncates at the tokenizer's model_max_length; cap it at the position table.
        self.bert_max = min(int(tokenizer.model_max_length),
                            int(self.bert_encoder.model.config.max_position_embeddings))
        self.baseline = None
        if rescale_with_baseline:
            if baseline_path is None:
                raise ScoringError("rescale_with_baseline needs a baseline_path that exists")
            self.baseline = read_baseline(baseline_path, num_layers)
        self.provenance = ScoreProvenance(
            bertscore_hash=bert_score.utils.get_hash(
                bertscore.name, num_layers, False, rescale_with_baseline,
                baseline_path is not None and rescale_with_baseline, False),
            bertscore_model=bertscore.name,
            bertscore_num_layers=num_layers,
            sentence_transformer_model=sentence_transformer.name,
            bertscore_max_tokens=self.bert_max,
            sentence_max_tokens=self.sentence_max,
            shared_forward_pass=self.shared,
            rescale_baseline=self.baseline,
        )

    @classmethod
    def from_profile(cls, profile, resolved: dict[str, ResolvedModel]) -> "AnswerScorer":
        spec = profile["models"]["bertscore"]
        baseline = spec.get("baseline_path")
        if baseline is not None:
            baseline = str(Path(baseline) if Path(baseline).is_absolute() else profile.root / baseline)
        return cls(resolved["bertscore"], resolved["sentence_transformer"],
                   num_layers=spec["num_layers"], batch_size=profile["scoring"]["batch_size"],
                   baseline_path=baseline, rescale_with_baseline=spec["rescale_with_baseline"])

    def _sequences(self, encoder: TokenEncoder, texts: list[str], max_length: int):
        ids = [tuple(seq) for seq in encoder.token_ids(texts, max_length)]
        at_limit = [t for t, seq in zip(texts, ids) if len(seq) >= max_length]
        full = dict(zip(at_limit, encoder.full_lengths(at_limit))) if at_limit else {}
        truncated = {t for t in at_limit if full[t] > max_length}
        return dict(zip(texts, ids)), truncated

    def score_pairs(self, candidates: Sequence[str], references: Sequence[str],
                    show_progress: bool = True, text_progress: bool = False) -> pd.DataFrame:
        """Score aligned lists of non-missing strings; one row per pair, in input order.

        Texts are stripped as both libraries do. An empty candidate or reference scores 0 on
        every metric and is flagged (bert-score 0.3.13 crashes on it under transformers 5).
        `text_progress` draws a plain-text bar, whose final state an executed notebook keeps
        (a widget bar would be saved at 0%).
        """
        bar_class = text_tqdm if text_progress else tqdm
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        candidates = [c.strip() for c in candidates]
        references = [r.strip() for r in references]
        texts = sorted({t for t in (*candidates, *references) if t})
        bert_ids, bert_truncated = self._sequences(self.bert_encoder, texts, self.bert_max)
        sentence_ids, sentence_truncated = self._sequences(self.sentence_encoder, texts,
                                                           self.sentence_max)
        bert_layer, sentence_layer = self.num_layers, self.sentence_layer
        if self.shared:
            layers = sorted({bert_layer, sentence_layer})
            sequences = list(bert_ids.values()) + list(sentence_ids.values())
            total = len(set(sequences))
            with bar_class(total=total, desc="encoding texts", disable=not show_progress) as bar:
                states = self.bert_encoder.hidden_states(sequences, layers, self.batch_size, bar)
            bert_states = sentence_states = states
        else:
            total = len(set(bert_ids.values())) + len(set(sentence_ids.values()))
            with bar_class(total=total, desc="encoding texts", disable=not show_progress) as bar:
                bert_states = self.bert_encoder.hidden_states(
                    list(bert_ids.values()), [bert_layer], self.batch_size, bar)
                sentence_states = self.sentence_encoder.hidden_states(
                    list(sentence_ids.values()), [sentence_layer], self.batch_size, bar)

        special = self.bert_encoder.special_ids
        pooled = {text: mean_pool(sentence_states[sentence_ids[text]][sentence_layer]) for text in texts}

        rows = []
        for candidate, reference in zip(candidates, references):
            row = {"generated_empty": not candidate, "reference_empty": not reference,
                   "truncated_bertscore": candidate in bert_truncated or reference in bert_truncated,
                   "truncated_sentence": candidate in sentence_truncated or reference in sentence_truncated}
            if not candidate or not reference:
                row.update(dict.fromkeys(METRIC_COLUMNS, 0.0))
            else:
                cand_seq, ref_seq = bert_ids[candidate], bert_ids[reference]
                score = greedy_match(
                    bert_states[cand_seq][bert_layer], bert_states[ref_seq][bert_layer],
                    np.array([0.0 if t in special else 1.0 for t in cand_seq]),
                    np.array([0.0 if t in special else 1.0 for t in ref_seq]))
                precision, recall, f1 = score
                if self.baseline is not None:
                    precision, recall, f1 = (rescale(v, b) for v, b in zip(score, self.baseline))
                row.update(bertscore_precision=precision, bertscore_recall=recall, bertscore_f1=f1,
                           sentence_cosine=float(pairwise_cosine(pooled[candidate][None, :],
                                                                 pooled[reference][None, :])[0]))
            rows.append(row)
        return pd.DataFrame(rows, columns=[*METRIC_COLUMNS, "generated_empty", "reference_empty",
                                           "truncated_bertscore", "truncated_sentence"])


def score_answers(frame: pd.DataFrame, scorer: AnswerScorer, k: int,
                  show_progress: bool = True, text_progress: bool = False) -> pd.DataFrame:
    """The scoring stage as one batch function: canonical table in, scored table out.

    Rows without a generated answer (no prediction) get missing metrics, never 0. Retrieval
    columns `rank` and `top_k_match` are filled where the row has retrieval results.
    """
    has_answer = frame["generated_answer"].notna().to_numpy()
    answered = frame[has_answer]
    scored = scorer.score_pairs(answered["generated_answer"].tolist(),
                                answered["reference_answer"].tolist(), show_progress, text_progress)
    result = pd.DataFrame({"id": frame["id"].to_numpy()})
    for column in METRIC_COLUMNS:
        values = pd.array([pd.NA] * len(frame), dtype="Float64")
        values[has_answer] = scored[column].to_numpy()
        result[column] = values
    for column in ("generated_empty", "truncated_bertscore", "truncated_sentence"):
        values = pd.array([pd.NA] * len(frame), dtype="boolean")
        values[has_answer] = scored[column].to_numpy()
        result[column] = values
    result["reference_empty"] = frame["reference_answer"].str.strip().eq("").to_numpy()
    retrieval = retrieval_columns(frame, k)
    result["rank"] = retrieval["rank"].to_numpy()
    result["top_k_match"] = retrieval["top_k_match"].to_numpy()
    return result
