"""transcripts.jsonl: one conversation a line, written as each ends, and read back for `replay`.

Each line is a Transcript's record (evalbook.scenarios.conversation): the scenario id, the
repeat, the seed, the turns, and how and why it ended. Lines are JSON with sorted keys and no
timing, so that two runs that had the same conversations write the same bytes. Text is kept as
it is (ensure_ascii off), so a reply may hold U+2028 or a form feed: only "\\n" ends a line.

`replay` (scenarios.replay_from) judges an earlier run's transcripts again without simulating.
The file, or the run folder holding it, is read here before the run folder is written (the
runner's pre-flight) and again by 02a_converse. Every problem is listed at once, each naming the
file, the line and the field (TranscriptFileError, exit 2):
- a line that is not UTF-8 or not JSON (a write cut short), a field given twice on a line;
- a field missing, unknown, or not of the report schema's `transcript` (a seed "7", a repeat
  true, a count below 0; a whole number is an int, not 2.0 or true), checked with
  evalbook.validation.input_validator so that what a replay accepts, the report accepts;
- a scenario id the scenario file does not hold, compared exactly ("glass\\n" is not "glass");
- more assistant replies than the scenario's max_turns, a repeat past scenarios.repeats;
- a (scenario, repeat) on two lines, naming both: each conversation is one line.

A usable file need not hold every conversation: a run interrupted during 02a_converse holds
those that ended. The replay judges what the file holds and lists each scenario's missing
repeats (`missing_repeats`) with how its source run ended (`source_run`, from evalbook.runs).
Such a replay is incomplete: its report says so, and the command exits 1 (IncompleteReplay).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence, TextIO

from evalbook.errors import EvalbookError, UnusableInput
from evalbook.layout import PARAMS_FILE, TRANSCRIPTS
from evalbook.runs import read_run
from evalbook.scenarios.conversation import Transcript
from evalbook.scenarios.judging import replies
from evalbook.scenarios.spec import Scenario
from evalbook.validation import input_validator, report_schema

FIELDS = ("scenario_id", "repeat", "seed", "turns", "end_reason", "end_detail", "simulator_calls", "system_calls")
SHOWN_PROBLEMS = 20
SHOWN_VALUE = 80  # characters of a refused value shown in a message
SHOWN_REASON = 200  # characters of the source run's failure shown beside what it lacks
ENDED = ("succeeded", "failed", "interrupted", "incomplete")  # the statuses of a run that ended (evalbook.runs)
TYPE_WORDS = {"integer": "a whole number", "string": "text", "array": "a list", "object": "an object",
              "null": "null"}


class TranscriptFileError(UnusableInput, ValueError):
    """A transcripts file that cannot be replayed; the message names the file, the line and the field."""


class IncompleteReplay(EvalbookError, RuntimeError):
    """A replay whose file lacked some of the scenario file's conversations: its report lists
    them, the run ends "incomplete" (never "succeeded"), and the command exits 1. The runner
    sets `result` (its RunResult) so that the command can still name the run's report."""

    result = None

    def heading(self, command: str) -> str | None:
        return "replay incomplete"


def line_of(transcript: Transcript) -> str:
    return json.dumps(transcript.as_record(), sort_keys=True, ensure_ascii=False) + "\n"


class TranscriptWriter:
    """Appends each finished transcript at once (flushed), so that an interrupted run keeps them.
    In a run folder the file must be new (write-once); the scratch folder's is replaced."""

    def __init__(self, path: Path, overwrite: bool):
        self.path, self.mode = Path(path), "w" if overwrite else "x"
        self.file: TextIO | None = None

    def __enter__(self) -> TranscriptWriter:
        self.file = self.path.open(self.mode, encoding="utf-8")
        return self

    def write(self, transcript: Transcript) -> None:
        self.file.write(line_of(transcript))
        self.file.flush()

    def __exit__(self, *exc_info) -> None:
        self.file.close()


def replay_path(value: str) -> Path:
    """The transcripts file `value` names: the file itself, or the run folder that holds one."""
    path = Path(value)
    return path / TRANSCRIPTS if path.is_dir() else path


# ---------------------------------------------------------------- reading and checking

class _RepeatedField(EvalbookError, ValueError):
    """A key given twice in one line's JSON object (raised by the object hook, caught per line)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object hook: a key given twice would otherwise keep its last value silently."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _RepeatedField(key)
        found[key] = value
    return found


@lru_cache(maxsize=1)
def _record_validator():
    """The report schema's `transcript`, with no other field: one definition for both."""
    schema = report_schema()
    return input_validator({"$defs": schema["$defs"], "$ref": "#/$defs/transcript", "unevaluatedProperties": False})


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_VALUE else text[:SHOWN_VALUE - 3] + "..."


def _schema_problem(error) -> str:
    field = ".".join(str(part) for part in error.absolute_path)
    if error.validator == "required":
        missing = next(key for key in error.validator_value if key not in error.instance)
        return f"field {'.'.join(filter(None, [field, missing]))!r} is missing"
    if error.validator in ("additionalProperties", "unevaluatedProperties"):
        known = set(error.schema.get("properties") or FIELDS)
        unknown = sorted(key for key in error.instance if key not in known)
        return f"unknown field {'.'.join(filter(None, [field, unknown[0]]))!r}; the fields are {', '.join(sorted(known))}"
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"field {field!r}: {_shown(error.instance)} is not {' or '.join(TYPE_WORDS.get(t, t) for t in wanted)}"
    if error.validator == "minimum":
        return f"field {field!r}: {_shown(error.instance)} is below {error.validator_value}"
    if error.validator == "enum":
        return f"field {field!r}: {_shown(error.instance)} is not one of {', '.join(map(str, error.validator_value))}"
    return f"field {field!r}: {_shown(error.instance)} is not valid ({error.validator} {_shown(error.validator_value)})"


def _problem(record: Any, known: dict[str, Scenario], repeats: int | None) -> str | None:
    """Why one parsed line cannot be replayed, else None."""
    if not isinstance(record, dict):
        return "not a JSON object"
    errors = sorted(_record_validator().iter_errors(record), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        return _schema_problem(errors[0])
    scenario = known.get(record["scenario_id"])
    if scenario is None:
        return (f"field 'scenario_id': {_shown(record['scenario_id'])} is not in the scenario file "
                "(replay the transcripts with the scenario file they were made from)")
    if repeats is not None and record["repeat"] >= repeats:
        return (f"field 'repeat': {record['repeat']} is past scenarios.repeats = {repeats} (repeats 0 to "
                f"{repeats - 1}): replay with the repeats of the run that held these conversations")
    said = len(replies(Transcript(**{key: record[key] for key in FIELDS})))
    if said > scenario.max_turns:
        return (f"field 'turns': {said} assistant replies, past the scenario's max_turns of {scenario.max_turns} "
                "(an assistant's written opening is not a reply)")
    return None


def _lines(data: bytes):
    """(line number, its text or None, why it cannot be read) of each line that is not blank."""
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            yield number, None, f"not UTF-8 (byte 0x{raw[error.start]:02x} at byte {error.start + 1} of the line)"
            continue
        if text.strip():
            yield number, text, None


def _parsed(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text, object_pairs_hook=_unique_fields), None
    except _RepeatedField as repeated:
        return None, f"field {repeated.key!r} is given twice"
    except RecursionError:
        return None, "not JSON (nested too deeply to read)"
    except json.JSONDecodeError as error:
        return None, f"not JSON ({error.msg}: column {error.colno})"
    except ValueError as error:  # a number too long to convert
        return None, f"not JSON ({error})"


def read_transcripts(path: Path, scenarios: Sequence[Scenario], repeats: int | None = None) -> list[Transcript]:
    """The transcripts of `path`, each checked against the report schema's transcript and the
    scenario file; with `repeats` (scenarios.repeats), no repeat past it. TranscriptFileError
    lists every line that cannot be used."""
    path = Path(path)
    if not path.is_file():
        run = source_run(path)
        ended = "" if run is None else f" ({run_state(run)})"
        raise TranscriptFileError(f"{path}: no transcripts file to replay{ended}; scenarios.replay_from names "
                                  "a transcripts.jsonl or the run folder holding one")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TranscriptFileError(f"{path}: cannot be read: {error.strerror or error}") from None
    known = {s.id: s for s in scenarios}
    transcripts, problems, first_line = [], [], {}
    for number, text, unreadable in _lines(data):
        record, problem = (None, unreadable) if unreadable else _parsed(text)
        problem = problem or _problem(record, known, repeats)
        if problem is None:
            pair = (record["scenario_id"], record["repeat"])
            if pair in first_line:
                problem = (f"scenario {pair[0]!r}, repeat {pair[1]} is also on line {first_line[pair]}: each "
                           "conversation is one line (a file joined from two runs, or a line copied?)")
            first_line.setdefault(pair, number)
        if problem is not None:
            problems.append(f"line {number}: {problem}")
            continue
        transcripts.append(Transcript(**{key: record[key] for key in FIELDS}))
    if not problems and not transcripts:
        problems.append("it holds no transcript")
    if problems:
        shown, more = problems[:SHOWN_PROBLEMS], len(problems) - SHOWN_PROBLEMS
        raise TranscriptFileError(f"{path}: cannot be replayed:\n" + "\n".join(f"  - {p}" for p in shown)
                                  + (f"\n  - ... and {more} more" if more > 0 else ""))
    return transcripts


# ---------------------------------------------------------------- what a replay lacks

def source_run(path: Path) -> dict[str, Any] | None:
    """How the run whose folder holds `path` ended: its folder name, its status (evalbook.runs:
    succeeded, failed, interrupted, or running, crashed, ... when it has no run.json) and the
    first line of its reason; None when `path` is not in a run folder."""
    folder = Path(path).parent
    if not (folder / PARAMS_FILE).is_file():
        return None
    record = read_run(folder)
    reason = (record.reason or "").strip().splitlines()
    first = reason[0] if reason else None
    if first is not None and len(first) > SHOWN_REASON:
        first = first[:SHOWN_REASON - 3] + "..."
    return {"run": folder.name, "status": record.status, "reason": first}


def run_state(run: dict[str, Any] | None) -> str:
    """How a replayed run ended, in words: "run <id> ended interrupted: <reason>"."""
    if run is None:
        return "the replayed file is not in a run folder"
    status = f"ended {run['status']}" if run["status"] in ENDED else f"has not ended ({run['status']})"
    return f"run {run['run']} {status}" + (f": {run['reason']}" if run["reason"] else "")


def missing_repeats(scenarios: Sequence[Scenario], transcripts: Sequence[Transcript],
                    repeats: int) -> list[dict[str, Any]]:
    """Each scenario, in file order, with the repeats (0 to repeats - 1) that have no transcript."""
    held: dict[str, set[int]] = {}
    for transcript in transcripts:
        held.setdefault(transcript.scenario_id, set()).add(transcript.repeat)
    missing = []
    for scenario in scenarios:
        have = held.get(scenario.id, set())
        lacking = [repeat for repeat in range(repeats) if repeat not in have]
        if lacking:
            missing.append({"scenario_id": scenario.id, "repeats": lacking, "n_transcripts": len(have)})
    return missing


def _repeats_phrase(repeats: Sequence[int]) -> str:
    if len(repeats) == 1:
        return f"repeat {repeats[0]}"
    return f"repeats {', '.join(map(str, repeats[:-1]))} and {repeats[-1]}"


def missing_lines(missing: Sequence[dict[str, Any]], run: dict[str, Any] | None) -> list[str]:
    """One line per scenario with missing repeats, with how the replayed run ended."""
    return [f"scenario {entry['scenario_id']!r}: no transcript of {_repeats_phrase(entry['repeats'])} in the "
            f"replayed file ({run_state(run)})" for entry in missing]


@dataclass(frozen=True)
class ReplaySource:
    """A transcripts file to replay, read and checked: its transcripts, what it lacks of the
    scenario file's conversations, and how the run that wrote it ended (None: not a run folder)."""

    path: Path
    transcripts: list[Transcript]
    n_conversations: int  # the scenario file's scenarios × scenarios.repeats
    missing: list[dict[str, Any]]
    run: dict[str, Any] | None

    def incomplete(self) -> str | None:
        """What the file lacks, in a sentence and a line per scenario; None when it lacks nothing."""
        if not self.missing:
            return None
        return (f"{len(self.transcripts)} of the {self.n_conversations} conversations have a transcript in {self.path} "
                f"({run_state(self.run)}):\n" + "\n".join(f"  - {line}" for line in missing_lines(self.missing, self.run)))


def read_replay_source(path: Path, scenarios: Sequence[Scenario], repeats: int) -> ReplaySource:
    """The transcripts file to replay (replay_path's), checked; TranscriptFileError when unusable."""
    transcripts = read_transcripts(path, scenarios, repeats)
    return ReplaySource(Path(path), transcripts, len(scenarios) * repeats, missing_repeats(scenarios, transcripts, repeats),
                        source_run(path))


def incomplete_replay(section: dict[str, Any] | None) -> IncompleteReplay | None:
    """The IncompleteReplay to raise for a report's scenarios section that lists missing
    conversations; None when it lists none (or the run had no scenarios)."""
    if not section or not section.get("missing"):
        return None
    expected = len(section["scenarios"]) * section["repeats"]
    lines = missing_lines(section["missing"], section.get("replay_source"))
    return IncompleteReplay(
        f"{section['n_transcripts']} of the {expected} conversations ({len(section['scenarios'])} scenarios × "
        f"{section['repeats']} repeats) had a transcript to replay, so the replay judged only those; "
        f"{run_state(section.get('replay_source'))}. The report lists what is missing:\n"
        + "\n".join(f"  - {line}" for line in lines))
