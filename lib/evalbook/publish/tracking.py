"""Runs and comparisons logged to MLflow, when a profile's `tracking.mlflow` asks for it.

Each successful run becomes one MLflow run in the profile's experiment, carrying:
- params: the resolved profile flattened to dotted keys, and the overrides as `override.<key>`;
- metrics: each headline metric's mean, with `.low`, `.high` (its 95% interval) and `.n`; each
  judge metric's pass rate (`<metric>_pass`); the report's counts (`counts.<name>`);
- tags: the dataset's name, split and inputs' sha256, the generator, the judge label, the git
  commit, evalbook's run id and the report's schema version;
- the evaluation set as a dataset input whose digest is its sha256 (cut to the 36 characters an
  MLflow digest holds; the whole sha256 is in the tag and the dataset's source);
- artifacts: the report JSON, the no-code report page, summary.md and the figures.
A comparison becomes one MLflow run too: its paired mean deltas with their intervals, the gate's
outcome, tagged with both run ids.

Credentials come from the environment only, as MLflow reads them (MLFLOW_TRACKING_TOKEN,
MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD). A tracking URI in a profile may not
carry `user:password@`; one from MLFLOW_TRACKING_URI is shown without it. Every param and tag
value passes the redactor of those variables and of every secret the profile reads from the
environment; an artifact that holds one is not logged, and the run's tags say which.

A server that cannot be reached, or refuses, raises TrackingFailed: the caller leaves NOT_TRACKED
in the folder and exits 1, as a refused upload does. mlflow (the client, `mlflow-skinny`) is the
optional extra `evalbook[mlflow]`, imported only when a profile asks for tracking.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evalbook.errors import RunFailed
from evalbook.layout import SUMMARY_FILE
from evalbook.params import ParamsError
from evalbook.redaction import Redactor, profile_secrets

EXTRA = "evalbook[mlflow]"
URI_VARIABLE = "MLFLOW_TRACKING_URI"
# the secrets among what MLflow's client reads for credentials (the user name is none): redacted
SECRET_VARIABLES = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD")
# MLflow's client retries a refused connection for minutes by default; a run waits at most
# about this long for a server that is down, unless the environment sets these itself; and the
# run's page is said on the log (stderr), not printed by MLflow on stdout, where the report path goes
CLIENT_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                   "MLFLOW_HTTP_REQUEST_TIMEOUT": "30", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
# MLflow's limits (mlflow.utils.validation): a batch's params and tags, its metrics, a param's value,
# a dataset digest
PARAMS_PER_BATCH = 100
METRICS_PER_BATCH = 1000
PARAM_VALUE_CHARACTERS = 6000
DIGEST_CHARACTERS = 36
TAG_PREFIX = "evalbook."


class TrackingFailed(RunFailed):
    """The run or comparison is complete locally, but MLflow did not take it (exit 1)."""

    def heading(self, command: str) -> str | None:
        return "tracking failed"


@dataclass(frozen=True)
class Target:
    """Where a profile logs: the tracking URI (as MLflow is given it), the experiment, and the
    URI as it may be shown (without credentials)."""

    uri: str
    experiment: str
    shown_uri: str
    source: str  # "the profile" or the environment variable it came from


def without_credentials(uri: str) -> str:
    """`uri` without the `user:password@` of its network location."""
    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _has_credentials(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.username is not None or parts.password is not None


def target(profile: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Target | None:
    """The profile's MLflow target; None when it asks for no tracking. A ValueError, in the
    profile's words, when it asks but names no usable URI."""
    environ = os.environ if environ is None else environ
    mlflow = ((profile.get("tracking") or {}).get("mlflow"))
    if not mlflow:
        return None
    uri, source = mlflow.get("tracking_uri"), "the profile's tracking.mlflow.tracking_uri"
    if uri and _has_credentials(uri):
        raise ValueError("tracking.mlflow.tracking_uri carries credentials (user:password@); a profile is "
                         "written into every run folder, so give them in MLFLOW_TRACKING_USERNAME and "
                         "MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) instead")
    if not uri:
        uri, source = environ.get(URI_VARIABLE), URI_VARIABLE
        if not uri:
            raise ValueError(f"tracking.mlflow.tracking_uri is null, so the URI is read from {URI_VARIABLE}, "
                             "which is not set; set it, or give tracking_uri in the profile")
    return Target(uri=uri, experiment=mlflow["experiment"], shown_uri=without_credentials(uri), source=source)


def profile_target(profile) -> Target | None:
    """The profile's target, checked before anything is written: a ParamsError (exit 2) in the
    profile's words when it names no usable URI, or when the MLflow client is not installed."""
    try:
        where = target(profile)
        if where is not None:
            check_available()
    except (ValueError, ImportError) as error:
        raise ParamsError(f"{profile.source_path}: {error}") from None
    return where


def check_available() -> None:
    """An ImportError naming the extra when the MLflow client is not installed."""
    if importlib.util.find_spec("mlflow") is None:
        raise ImportError(f"the profile asks for MLflow tracking, but mlflow is not installed: install the "
                          f"extra {EXTRA} (pip install -e '.[mlflow]'; make test installs it)")


def redactor(values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Redactor:
    """The redactor of what tracking must never write: the profile's secrets, MLflow's credential
    variables and a tracking URI's user:password."""
    environ = os.environ if environ is None else environ
    secrets = [*profile_secrets(values, environ), *(environ.get(name) for name in SECRET_VARIABLES)]
    uri = environ.get(URI_VARIABLE) or ""
    parts = urlsplit(uri)
    secrets += [parts.password, parts.username and parts.password and f"{parts.username}:{parts.password}"]
    return Redactor(secret for secret in secrets if secret)


def flattened(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested mapping as dotted keys and text values (null, lists and booleans as JSON)."""
    flat: dict[str, str] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flattened(value, f"{name}."))
        elif isinstance(value, str):
            flat[name] = value
        else:
            flat[name] = json.dumps(value, sort_keys=True, default=str)
    return flat


# ---------------------------------------------------------------- what a run logs

def run_params(values: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, str]:
    """The resolved profile, flattened, and the overrides as `override.<key>`."""
    params = flattened(values)
    for key, value in (overrides or {}).items():
        params[f"override.{key}"] = value if isinstance(value, str) else json.dumps(value, default=str)
    return params


def run_metrics(headline: Mapping[str, Any], report: Mapping[str, Any]) -> dict[str, float]:
    """Each headline metric's mean, interval bounds and n; the judge's pass rates; the counts."""
    metrics: dict[str, float] = {}
    for name, summary in (headline.get("metrics") or {}).items():
        for field, key in (("mean", name), ("low", f"{name}.low"), ("high", f"{name}.high"), ("n", f"{name}.n")):
            if isinstance(summary.get(field), (int, float)) and not isinstance(summary.get(field), bool):
                metrics[key] = float(summary[field])
    for name, summary in (headline.get("pass_rates") or {}).items():
        if isinstance(summary.get("rate"), (int, float)):
            metrics[f"{name}_pass"] = float(summary["rate"])
            if isinstance(summary.get("n_scored"), int):
                metrics[f"{name}_pass.n"] = float(summary["n_scored"])
    for name, count in (report.get("counts") or {}).items():
        if isinstance(count, (int, float)) and not isinstance(count, bool):
            metrics[f"counts.{name}"] = float(count)
    return metrics


def run_tags(headline: Mapping[str, Any], report: Mapping[str, Any]) -> dict[str, str]:
    run = headline.get("run") or {}
    dataset = report.get("dataset") or {}
    inputs = run.get("inputs_sha256") or {}
    tags = {
        "dataset.name": dataset.get("name"), "dataset.split": dataset.get("split"),
        "generator": run.get("models", {}).get("generator"), "judge.label": run.get("judge_label"),
        "git_commit": headline.get("git_commit"), "run_id": headline.get("run_id"),
        "report.schema_version": report.get("schema_version"), "env": headline.get("env"),
        **{f"inputs_sha256.{name}": sha for name, sha in inputs.items()},
    }
    return {f"{TAG_PREFIX}{key}": str(value) for key, value in tags.items() if value is not None}


# ---------------------------------------------------------------- the client

def _client(where: Target):
    for name, value in CLIENT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    from mlflow.tracking import MlflowClient  # the optional extra: imported only when tracking

    return MlflowClient(tracking_uri=where.uri)


def _experiment_id(client, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        if experiment.lifecycle_stage != "active":
            raise ValueError(f"the MLflow experiment {name!r} is deleted; restore it or name another in "
                             "tracking.mlflow.experiment")
        return experiment.experiment_id
    return client.create_experiment(name)


def _chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _explained(error: Exception, where: Target, clean: Redactor) -> str:
    """What went wrong, in one line without credentials, and what to do."""
    text = clean.text(f"{type(error).__name__}: {error}")
    text = re.sub(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s/@]+@", r"\1", text)  # no user:password@
    text = " ".join(text.split())
    if len(text) > 600:
        text = text[:600] + " ..."
    if re.search(r"\b401\b|Unauthorized|not authenticated|Credentials? (were )?not", text, re.IGNORECASE):
        return (f"MLflow at {where.shown_uri} refused the credentials ({text}); set MLFLOW_TRACKING_USERNAME "
                "and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN, in the environment")
    if re.search(r"\b403\b|PERMISSION_DENIED|Permission denied", text):
        return (f"MLflow at {where.shown_uri} refused to let this user write to experiment "
                f"{where.experiment!r} ({text}); ask for EDIT permission on it")
    return f"MLflow at {where.shown_uri} could not be reached or refused the run ({text})"


@dataclass
class Logged:
    """What was logged: the MLflow run id, its page, and the artifacts withheld because they hold
    a secret."""

    mlflow_run_id: str
    withheld: list[str]
    url: str


def _log(where: Target, name: str, params: Mapping[str, str], metrics: Mapping[str, float],
         tags: Mapping[str, str], artifacts: Iterable[tuple[Path, str | None]], clean: Redactor,
         dataset: dict[str, str] | None = None) -> Logged:
    """One MLflow run: `params`, `metrics`, `tags` (each value redacted), the dataset input and
    `artifacts` ((path, folder in the run's artifacts)); finished, or failed on an error."""
    from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunStatus  # the optional extra

    client = _client(where)
    experiment = _experiment_id(client, where.experiment)
    withheld = [str(path.name) for path, _ in artifacts if path.is_file() and clean.holds_secret(
        path.read_text("utf-8", errors="replace"))]
    cut = sorted(key for key, value in params.items() if len(value) > PARAM_VALUE_CHARACTERS)
    all_tags = {**tags, "mlflow.runName": name}
    if withheld:
        all_tags[f"{TAG_PREFIX}artifacts_withheld"] = ", ".join(withheld) + " (they hold a secret)"
    if cut:
        all_tags[f"{TAG_PREFIX}params_cut"] = ", ".join(cut) + f" (longer than {PARAM_VALUE_CHARACTERS} characters)"
    run = client.create_run(experiment, run_name=name,
                            tags={key: clean.text(value) for key, value in all_tags.items()})
    run_id = run.info.run_id
    try:
        now = int(time.time() * 1000)
        param_list = [Param(key, clean.text(value)[:PARAM_VALUE_CHARACTERS]) for key, value in params.items()]
        for batch in _chunks(param_list, PARAMS_PER_BATCH):
            client.log_batch(run_id, params=batch)
        metric_list = [Metric(key, value, now, 0) for key, value in metrics.items()]
        for batch in _chunks(metric_list, METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=batch)
        if dataset is not None:
            entity = Dataset(name=clean.text(dataset["name"]), digest=dataset["sha256"][:DIGEST_CHARACTERS],
                             source_type="local", source=json.dumps({"sha256": dataset["sha256"],
                                                                      "path": clean.text(dataset["path"])}))
            client.log_inputs(run_id, datasets=[DatasetInput(entity, tags=[InputTag("mlflow.data.context", "evaluation")])])
        for path, folder in artifacts:
            if path.name in withheld:
                continue
            if path.is_dir():
                client.log_artifacts(run_id, str(path), folder)
            elif path.is_file():
                client.log_artifact(run_id, str(path), folder)
    except BaseException:
        try:
            client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        except Exception:  # noqa: BLE001 - the first error is the one to report
            pass
        raise
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    return Logged(run_id, withheld, f"{where.shown_uri.rstrip('/')}/#/experiments/{experiment}/runs/{run_id}")


def _tracked(where: Target, clean: Redactor, log_it) -> Logged:
    """`log_it()`, its failure a TrackingFailed saying what went wrong without credentials."""
    try:
        return log_it()
    except Exception as error:  # noqa: BLE001 - MLflow's errors are many; each becomes NOT_TRACKED
        raise TrackingFailed(_explained(error, where, clean)) from error


def log_run(where: Target, values: Mapping[str, Any], headline: Mapping[str, Any], report: Mapping[str, Any],
            run_dir: Path, report_path: Path, pages: Iterable[Path]) -> Logged:
    """Log a finished run (its folder `run_dir`, its report and readers' pages) as one MLflow run."""
    clean = redactor(values)
    run = headline.get("run") or {}
    inputs = run.get("inputs_sha256") or {}
    dataset = None
    if inputs.get("input_path"):
        name = (report.get("dataset") or {}).get("name") or "evaluation set"
        dataset = {"name": str(name), "sha256": inputs["input_path"], "path": str(values.get("input_path"))}
    artifacts = [(report_path, None), *((page, "pages") for page in pages), (run_dir / SUMMARY_FILE, None),
                 (run_dir / "figures", "figures")]
    name = f"evalbook {headline.get('run_id', '')[:8]}"
    return _tracked(where, clean, lambda: _log(
        where, name, run_params(values, headline.get("overrides")), run_metrics(headline, report),
        run_tags(headline, report), artifacts, clean, dataset))


def comparison_metrics(comparison: Mapping[str, Any]) -> dict[str, float]:
    """Each compared metric's paired mean delta with its interval and n, the means, and the gate."""
    metrics: dict[str, float] = {}
    for row in comparison.get("metrics") or []:
        if not row.get("compared"):
            continue
        name = row["metric"]
        for field, key in (("mean_delta", f"delta.{name}"), ("ci_low", f"delta.{name}.low"),
                           ("ci_high", f"delta.{name}.high"), ("n_paired", f"delta.{name}.n"),
                           ("baseline_mean", f"baseline.{name}"), ("candidate_mean", f"candidate.{name}")):
            if isinstance(row.get(field), (int, float)) and not isinstance(row.get(field), bool):
                metrics[key] = float(row[field])
    gate = comparison.get("gate")
    if gate:
        metrics["gate.failed"] = float(bool(gate.get("failed")))
        metrics["gate.rules_failed"] = float(sum(bool(rule.get("failed")) for rule in gate.get("rules") or []))
    pairing = comparison.get("pairing") or {}
    for field in ("n_paired", "n_only_baseline", "n_only_candidate"):
        if isinstance(pairing.get(field), int):
            metrics[f"pairing.{field}"] = float(pairing[field])
    return metrics


def log_comparison(where: Target, values: Mapping[str, Any], comparison: Mapping[str, Any], comparison_id: str,
                   comparison_path: Path, folder: Path, pages: Iterable[Path]) -> Logged:
    """Log a written comparison as one MLflow run, tagged with both run ids and the gate's outcome."""
    clean = redactor(values)
    baseline, candidate = comparison.get("baseline") or {}, comparison.get("candidate") or {}
    gate = comparison.get("gate")
    tags = {
        f"{TAG_PREFIX}kind": "comparison", f"{TAG_PREFIX}comparison_id": comparison_id,
        f"{TAG_PREFIX}baseline.run_id": str(baseline.get("run_id")),
        f"{TAG_PREFIX}candidate.run_id": str(candidate.get("run_id")),
        f"{TAG_PREFIX}gate": "no rules" if not gate else ("failed" if gate.get("failed") else "passed"),
        f"{TAG_PREFIX}compare.schema_version": str(comparison.get("schema_version")),
    }
    params = {f"gate.rule.{i}": rule["rule"] for i, rule in enumerate((gate or {}).get("rules") or [])}
    params.update({f"compare.{key}": json.dumps(value) for key, value in (comparison.get("parameters") or {}).items()})
    artifacts = [(comparison_path, None), *((page, "pages") for page in pages), (folder / SUMMARY_FILE, None),
                 (folder / "figures", "figures")]
    name = f"evalbook compare {str(baseline.get('run_id'))[:8]} vs {str(candidate.get('run_id'))[:8]}"
    return _tracked(where, clean, lambda: _log(where, name, params, comparison_metrics(comparison), tags,
                                               artifacts, clean))


def shown(where: Target, error: Exception) -> str:
    """The NOT_TRACKED marker's text: where to, and why (already without credentials)."""
    return f"not tracked in MLflow at {where.shown_uri} (experiment {where.experiment!r}): {error}\n"

