#!/usr/bin/env bash
# The CI recipe's steps (github-actions.yml), run on this machine with the variables GitHub
# sets: first the main branch's job (evaluate, collect: its artifact), then the pull request's
# (evaluate, fetch-baseline from that artifact, compare with the gate, collect). It exits with
# the comparison's code: 3 when a gate rule failed, 0 otherwise.
#
#   examples/ci/run-like-ci.sh [WORK_FOLDER]
#
#   BASELINE_ARGS     overrides for the main branch's run (default: none, the sample as shipped)
#   CANDIDATE_ARGS    overrides for the pull request's run, e.g.
#                     "-p predictions_path=data/sample/predictions-truncated.jsonl"
#   EVALBOOK_FAIL_ON  the gate's rules, as in the workflow; empty: no gate
#   BASELINE_ARTIFACT an earlier main job's artifact folder to reuse instead of running it again
#   EMBEDDING_CACHE   the embedding cache folder (default WORK_FOLDER/embedding-cache), which the
#                     workflow restores between jobs
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
step="$root/examples/ci/evalbook-ci.sh"

github_job() {  # the variables GitHub Actions sets for a job, each in its own folder
    local name=$1 event=$2 ref=$3
    export CI=true GITHUB_ACTIONS=true GITHUB_WORKSPACE="$root" GITHUB_EVENT_NAME="$event" GITHUB_REF="$ref"
    export GITHUB_SHA
    GITHUB_SHA=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo 0000000000000000000000000000000000000000)
    export RUNNER_TEMP="$work/$name/runner-temp" GITHUB_STEP_SUMMARY="$work/$name/step-summary.md"
    export EVALBOOK_OUTPUTS="$work/$name/outputs" EVALBOOK_ARTIFACTS="$work/$name/artifact"
    mkdir -p "$RUNNER_TEMP"
    : > "$GITHUB_STEP_SUMMARY"
}

# The embedding cache the workflow restores: one folder shared by both jobs here.
shared_cache="-p scoring.embedding_cache.path=${EMBEDDING_CACHE:-$work/embedding-cache}"

baseline=${BASELINE_ARTIFACT:-}
if [[ -z "$baseline" ]]; then
    echo "== the main branch's job"
    github_job main push refs/heads/main
    EVALBOOK_ARGS="$shared_cache ${BASELINE_ARGS:-}" "$step" evaluate
    "$step" collect
    baseline=$EVALBOOK_ARTIFACTS
fi

echo "== the pull request's job"
github_job pr pull_request refs/pull/1/merge
export EVALBOOK_BASELINE=$baseline
EVALBOOK_ARGS="$shared_cache ${CANDIDATE_ARGS:-}" "$step" evaluate
"$step" fetch-baseline
status=0
"$step" compare || status=$?
"$step" collect
echo "== the comparison exited $status; the job summary is $GITHUB_STEP_SUMMARY"
exit "$status"
