#!/usr/bin/env bash
# The steps of the CI recipe (github-actions.yml), one per call, so that the workflow and
# run-like-ci.sh run the same commands:
#
#   evalbook-ci.sh evaluate         make run on this checkout; its report's location -> $state/report
#   evalbook-ci.sh fetch-baseline   the baseline report's location -> $state/baseline
#   evalbook-ci.sh compare          05_compare of baseline and report, with the gate when
#                                   EVALBOOK_FAIL_ON holds rules; exits 3 when a rule failed
#   evalbook-ci.sh collect          the run folders, comparisons and pages -> $EVALBOOK_ARTIFACTS
#
# Settings, from the environment (the workflow's `env:`):
#   EVALBOOK_PARAMS     the profile (default params/default.yaml)
#   EVALBOOK_ARGS       more overrides for the run, e.g. "-p predictions_path=answers.jsonl"
#   EVALBOOK_OUTPUTS    the outputs root (default outputs)
#   EVALBOOK_ENV        the env of the runs (default ci)
#   EVALBOOK_FAIL_ON    gate rules, separated by spaces, e.g. "bertscore_f1<-0.02 sentence_cosine<-0.02";
#                       empty: compare reports and never fails
#   EVALBOOK_BASELINE   the baseline: a report's path or s3:// URL, or a folder holding the
#                       baseline's collected artifact; empty: the latest successful run of
#                       EVALBOOK_BASELINE_WORKFLOW on EVALBOOK_BASELINE_BRANCH, downloaded with gh
#   EVALBOOK_ARTIFACTS  where collect puts what the workflow uploads
# Secrets (a judge's API key, AWS credentials, GH_TOKEN) are read from the environment by the
# tools that need them; none is ever passed as a parameter.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
state="${RUNNER_TEMP:-/tmp}/evalbook-ci"
mkdir -p "$state"
params=${EVALBOOK_PARAMS:-params/default.yaml}
outputs=${EVALBOOK_OUTPUTS:-outputs}
env_name=${EVALBOOK_ENV:-ci}
common=(-p "outputs_root=$outputs" -p "env=$env_name")

last_line() { tail -n 1 "$1"; }

evaluate() {
    # shellcheck disable=SC2086  # EVALBOOK_ARGS is a list of overrides, split on spaces
    # --no-print-directory: a make started by another make (as under `make test`) would print
    # "make[1]: Leaving directory" after the report's location, the line read below
    make --no-print-directory run PARAMS="$params" ARGS="${common[*]} ${EVALBOOK_ARGS:-}" | tee "$state/run.log"
    last_line "$state/run.log" > "$state/report"
}

report_in() {
    # the run report (<run_id>.json, not a comparison) in a collected artifact folder
    find "$1" -path '*/eval-runs/*' -name '*.json' -not -path '*/comparisons/*' \
        -not -path '*/calibration/*' -regextype posix-extended \
        -regex '.*/[0-9a-f-]{36}\.json' | sort | tail -n 1
}

fetch_baseline() {
    local baseline=${EVALBOOK_BASELINE:-}
    if [[ -z "$baseline" ]]; then
        local workflow=${EVALBOOK_BASELINE_WORKFLOW:-evalbook.yml} branch=${EVALBOOK_BASELINE_BRANCH:-main}
        local run_id
        run_id=$(gh run list --workflow "$workflow" --branch "$branch" --status success --limit 1 \
                 --json databaseId --jq '.[0].databaseId')
        if [[ -z "$run_id" ]]; then
            echo "no successful $workflow run on $branch to compare with" >&2
            exit 1
        fi
        baseline="$state/baseline-artifact"
        gh run download "$run_id" --name "${EVALBOOK_BASELINE_ARTIFACT:-evalbook-$branch}" --dir "$baseline"
    fi
    if [[ -d "$baseline" ]]; then
        baseline=$(report_in "$baseline")
        [[ -n "$baseline" ]] || { echo "no run report in the baseline folder ${EVALBOOK_BASELINE}" >&2; exit 1; }
    fi
    echo "$baseline" > "$state/baseline"
    echo "baseline: $baseline"
}

compare() {
    local gate=() rule
    for rule in ${EVALBOOK_FAIL_ON:-}; do
        gate+=(--fail-on "$rule")
    done
    local status=0
    .venv/bin/python -m evalbook compare --params "$params" "${common[@]}" \
        --baseline "$(cat "$state/baseline")" --candidate "$(cat "$state/report")" "${gate[@]}" \
        | tee "$state/compare.log" || status=${PIPESTATUS[0]}
    last_line "$state/compare.log" > "$state/comparison"
    return "$status"
}

collect() {
    local artifacts=${EVALBOOK_ARTIFACTS:?set EVALBOOK_ARTIFACTS to the folder the workflow uploads}
    mkdir -p "$artifacts"
    # every run, comparison and the index, with their HTML; no cache and no exported graph (the
    # workflow caches those)
    tar -C "$outputs" --exclude=./embedding-cache --exclude=./onnx-graphs --exclude=./interactive \
        --exclude='*.sqlite*' -cf - . \
        | tar -C "$artifacts" -xf -
    echo "collected $(find "$artifacts" -type f | wc -l) files into $artifacts"
}

case "${1:-}" in
    evaluate) evaluate ;;
    fetch-baseline) fetch_baseline ;;
    compare) compare ;;
    collect) collect ;;
    *) echo "usage: $0 evaluate|fetch-baseline|compare|collect" >&2; exit 2 ;;
esac
