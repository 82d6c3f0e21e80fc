"""evalbook: parameterized notebooks that evaluate a RAG or LLM system's answers.

The package is in layers, and imports point down only: from the command line to the runner, to
publish, to the documents, to the stages, to the foundations. pyproject.toml's import-linter
contract lists them and tests/test_layers.py enforces it. Each notebook opens its stage through
`pipeline` (00-04), `compare.context` (05), `calibrate.context` (06) or `calibrate.labelling` (07); every file name of a run
folder is spelled in `layout` alone. From the top:

6. The command line
- __main__              `python -m evalbook run|compare|calibrate|diff|trend`; exit codes from errors

5. The runner                                                             what it writes
- runner                plans a run, runs its stages, closes it     params.yaml, run.json, FAILED
- sidedocs              runs a comparison or a calibration beside its runs (05, 06)
- execution             the one Papermill call of a stage; the index rebuilt; NOT_UPLOADED
- services              starts and stops the model server, the service    judge-server.log,
                        under test and the judge server around the stages service.log
- interrupts            SIGINT and SIGTERM raised as RunInterrupted, or held while files are written

4. Publish
- publish/              after the stages
    pages                 a notebook's offline HTML                       <stage>.html, .noinput.html
    catalog               what the index lists: every run, comparison and
                          calibration as rows
    index                 renders them                                     index.html
    rundiff               `make diff` of two runs
    summary               a run's or a comparison's summary for a pull     summary.md
                          request, also appended to $GITHUB_STEP_SUMMARY
    trend                 the trend page across runs                       trend.html, trend.json
    tracking              a run or comparison logged to MLflow (opt-in)    NOT_TRACKED

3. The documents
- pipeline              the stage code of 00-04, which the notebooks call
- report/               04_report                                         <run_id>.json, figures/
    document              assembles, validates and writes the report
    schema                the metric ranges of report-v1.json, from the registry
    reader                reads a report (local or S3): a typed view
    headline              the first screen: means with intervals, pins, counts
    slices                where it fails: each slice level's metric against the rest, with
                          intervals, permutation p-values and Benjamini-Hochberg flags
    topics                questions grouped by meaning (k-means, k by silhouette), each topic
                          named by its most distinctive terms (class-based TF-IDF)
    failures              Where it fails in words, for 04 and summary.md
    checks                which answers fail a check: pass rates, failing answers
    explorer              every example in one table to search, filter, sort and open
                          (DataTables from itables' bundle, offline)
    figures, tables       what 04 shows
    sections              the page's sections in order, which a run shows, its contents list
    labels                the provenance fields in words (How this run was made)
- trend/                every headline metric across runs (`make trend`)
    headline              a run's headline and its per-example values     headline.json,
                          (what the index and the trend read)              values.parquet
    series                the series; a step's paired deltas, real or noise
    document              the trend document: runs found (local or S3),
                          steps reused, what changed
    figures               the small multiples
- compare/              05_compare: gates, settings, the document (and    comparisons/
                        the earlier comparable run), tables and figure
    gate                  the opt-in regression gate (compare --fail-on)
    slices                the slices a change moved: each level's paired deltas against the rest's
    verdict               the one sentence a comparison's page leads with; what it left out and why
- calibrate/            06_calibrate: a run against human labels          <run_id>/calibration/
    labels                reads and checks a labels file, matches it to a run
    agreement             rank, ROC, thresholds, kappa, alpha (scipy, scikit-learn, krippendorff)
    analysis, document    one metric against the labels; the calibrate-v1 document
    context, settings     where 06 reads and writes; its defaults
    tables, figures       what 06 shows
    labelling             07_label: the stratified sample, the labels file    <env>/labels/<run_id>.csv
                          written label by label, where the rater is
    labeller              07_label's widgets (ipywidgets)

2. The stages
- generate/             00_generate (when the profile enables it)         generated.parquet,
    settings              the endpoint (http or openai) from the profile  generation.json,
    mapping, client       JMESPath response mapping; the calls            generate-cache.sqlite
    stage, display        every row accounted for; what 00 shows
    service               the service under test as a child process        service.log
- scenarios/            02a_converse: simulated conversations, judged      transcripts.jsonl,
                        in 03_judge                                       conversations.json,
    spec                  the scenario file, checked against scenarios-v1.json  scenario-judgments.json
    simulator             the simulated user's JSON reply, seeds, loops; its prompt
    conversation          one conversation and why it ended
    sides, run            both sides on the wire; the plan, budget and run
    transcripts           transcripts.jsonl written as each ends, replayed
    judging, outcomes     the judge's code on transcripts; pass rates over repeats: Wilson, pass^k, pass@k
    report, display       the report's scenarios section; what 02a and 04 show
- checks/               what an answer is checked for, exactly and with no judge (in the report)
    protocol              pass, fail or error with a reason; pass rates with Wilson intervals
    facts                 the fact check: changed, unsupported, beyond the reference, missing
    numbers, dates, names the facts of a text and their equal forms; found, the scanner
    assertions            the user's own checks (contains, regex, number, json, max_words, ...)
    checksfile            a checks file and check columns, refused by entry and field
    run                   every check on every example of a run
    cache                 each example's outcomes kept between runs, so    results.sqlite
                          that a warm run computes no check
- load                  the evaluation set and answers, validated, joined canonical.parquet, load.json
- judge/                03_judge: client, the metric protocol, one        judge.json
                        module per judged metric, the local llama.cpp
                        server
- score/                02_score; the questions' embeddings for topics    scored.parquet, scoring.json,
                                                                          topics.json
    models                the pinned weights, resolved and sha256-checked
    scoring               the encoder pass; BERTScore and cosine per pair
    similarity, retrieval the metric math; top-k match and rank
    embcache, engines     the embedding cache; local or Ray Data actors
    onnxgraph             the onnxruntime backend's exported graph and its  onnx-graphs/
                          cache (scoring.backend)
- provenance            the provenance record               (in provenance.json, run.json, the report)

1. The foundations
- runs          a run folder's state: run.json (RunJson), its markers, every run as a record, the
                latest successful runs; finding a run by id, prefix or report
- templating    the one Jinja2 environment (templates/): every page and summary evalbook writes
- calls         what the judge's and generate's calls share: their worker-thread loop, retry waits
- replycache    their SQLite reply cache                 judge-cache.sqlite, generate-cache.sqlite
- resultcache   seeded results kept between runs: the     results.sqlite (in the embedding
                topics, the slices' tests                 cache's folder)
- prompts       their versioned prompt templates, rendered in a sandbox
- processes     child processes: probing a server, tying it to its parent, ending it, its log
- kernel        the stage kernel's transport: local IPC sockets, not TCP
- redaction     the one redactor: the profile's secrets out of every response stored or shown
- params        profiles: read, checked, overridden, resolved
- validation    the JSON Schema checks of profiles, reports, comparisons and calibrations
- storage       the outputs root, local or S3: is_remote, s3:// reads, uploading a run folder
- layout        every file name of a run folder and of the outputs root, and where runs live
- files         the atomic, write-once writer
- metrics       the metric registry: name, kind, label, colour, direction, range, where it sits
- stats         summaries, bootstrap intervals (one Bootstrap of defaults), paired statistics
- escaping      user text into HTML and Markdown, cut to what a page shows
- formatting    MISSING, is_missing, number, signed, interval: how a value reads everywhere
- errors        EvalbookError, the one base of evalbook's failures, and their exit codes
"""
