"""What two runs may be compared on: the judge, embedding and retrieval gates.

- Judge metrics only when both judges ran under the same judge label.
- Embedding metrics (BERTScore, sentence cosine) get deltas only when every model pin matches;
  otherwise the two means are shown side by side, without deltas.
- The retrieval metrics at k (top-k match, MRR@k, precision@k, recall@k, nDCG@k) get deltas only
  when both runs used the same k.
"""

from __future__ import annotations

from typing import Any

EMBEDDING_ROLES = ("sentence_transformer", "bertscore")
# Profile model keys that change a score; `source` and paths say where weights came from, not what they are.
PROFILE_PIN_KEYS = ("name", "revision", "sha256", "num_layers", "idf", "rescale_with_baseline")


def judge_side(report: dict[str, Any]) -> tuple[str | None, str, str | None]:
    """(label, status, reason) of a report's judge; status `absent` for a report without one."""
    summary = report.get("judge_summary")
    if summary is None:
        return None, "absent", f"report schema {report.get('schema_version')} has no judge section"
    return summary.get("label"), summary.get("status"), summary.get("reason")


def judge_gate(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """Judge metrics are compared only when both judges ran under the same label."""
    b_label, b_status, b_reason = judge_side(baseline)
    c_label, c_status, c_reason = judge_side(candidate)
    gate = {"compared": False, "reason": None, "baseline_label": b_label, "candidate_label": c_label,
            "baseline_status": b_status, "candidate_status": c_status, "metrics": []}
    labels = f"baseline judge label {b_label!r}, candidate judge label {c_label!r}"
    not_ran = [(side, status, reason) for side, status, reason in
               (("baseline", b_status, b_reason), ("candidate", c_status, c_reason)) if status != "ran"]
    if not_ran:
        said = "; ".join(f"the {side} judge did not run ({status}: {reason})"
                         for side, status, reason in not_ran)
        gate["reason"] = f"judge metrics not compared: {said}; {labels}"
    elif b_label is None or c_label is None:
        gate["reason"] = f"judge metrics not compared: a judge without a label cannot be matched; {labels}"
    elif b_label != c_label:
        gate["reason"] = (f"judge metrics not compared: baseline judge label {b_label!r} differs from "
                          f"candidate judge label {c_label!r}")
    else:
        candidate_metrics = candidate["judge_summary"]["metrics"]
        shared = [m for m in baseline["judge_summary"]["metrics"] if m in candidate_metrics]
        gate["metrics"] = shared
        gate["compared"] = bool(shared)
        if not shared:
            gate["reason"] = f"judge metrics not compared: no judge metric was scored in both runs ({labels})"
    return gate


def embedding_pins(report: dict[str, Any]) -> dict[str, Any]:
    """Everything the report records that fixes the embedding scores, by dotted name."""
    provenance = report.get("provenance") or {}
    pins: dict[str, Any] = {f"models.{role}": (report.get("models") or {}).get(role) for role in EMBEDDING_ROLES}
    pins["provenance.bertscore_hash"] = provenance.get("bertscore_hash")
    pins["provenance.bertscore_num_layers"] = provenance.get("bertscore_num_layers")
    for role, digest in (provenance.get("weights_sha256") or {}).items():
        pins[f"provenance.weights_sha256.{role}"] = digest
    profile_models = (provenance.get("params_profile") or {}).get("models") or {}
    for role in EMBEDDING_ROLES:
        spec = profile_models.get(role) or {}
        for key in PROFILE_PIN_KEYS:
            if key in spec:
                pins[f"provenance.params_profile.models.{role}.{key}"] = spec[key]
    return {name: value for name, value in pins.items() if value is not None}


def embedding_gate(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """Embedding deltas only when every pin recorded in either report is equal in both.

    A pin recorded in one report only counts as differing: its equality cannot be shown.
    """
    b_pins, c_pins = embedding_pins(baseline), embedding_pins(candidate)
    checked = list(dict.fromkeys([*b_pins, *c_pins]))
    differing = [{"pin": name, "baseline": b_pins.get(name), "candidate": c_pins.get(name)}
                 for name in checked if b_pins.get(name) != c_pins.get(name)]
    reason = None
    if differing:
        described = "; ".join(
            f"{d['pin']}: baseline {_shown(d['baseline'])}, candidate {_shown(d['candidate'])}"
            for d in differing)
        reason = f"embedding metrics shown side by side without deltas: model pins differ ({described})"
    return {"compared": not differing, "reason": reason, "checked_pins": checked, "differing_pins": differing}


def _shown(value: Any) -> str:
    return "not recorded" if value is None else repr(value)


def _has_retrieval(report: dict[str, Any]) -> bool:
    return any(example.get("retrieval") is not None for example in report["examples"])


def retrieval_gate(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """The retrieval metrics at k are compared when both runs have retrieval results and used the
    same k."""
    b_k, c_k = baseline["retrieval_summary"]["k"], candidate["retrieval_summary"]["k"]
    present = {"baseline": _has_retrieval(baseline), "candidate": _has_retrieval(candidate)}
    gate = {"compared": False, "shown": False, "reason": None, "baseline_k": b_k, "candidate_k": c_k}
    if not any(present.values()):
        gate["reason"] = "retrieval metrics not compared: neither run has retrieval results"
    elif not all(present.values()):
        side = "baseline" if present["baseline"] else "candidate"
        gate["reason"] = f"retrieval metrics not compared: only the {side} run has retrieval results"
    elif b_k != c_k:
        gate["shown"] = True
        gate["reason"] = (f"retrieval metrics shown side by side without deltas: baseline k={b_k} differs "
                          f"from candidate k={c_k}")
    else:
        gate["compared"] = gate["shown"] = True
    return gate
