"""transcripts.jsonl: one conversation a line, written as each ends, and read back for `replay`.

Each line is a Transcript's record (evalbook.scenarios.conversation): the scenario id, the
repeat, the seed, the turns, and how and why it ended. Lines are JSON with sorted keys and no
timing, so that two runs that had the same conversations write the same bytes.

`replay` (scenarios.replay_from) judges an earlier run's transcripts again without simulating:
the file, or the run folder holding it, is read back here, each line checked, and a line that
cannot be used is refused naming the file, the line and the field (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence, TextIO

from evalbook.errors import UnusableInput
from evalbook.layout import TRANSCRIPTS
from evalbook.scenarios.conversation import END_REASONS, Transcript
from evalbook.scenarios.spec import Scenario

FIELDS = ("scenario_id", "repeat", "seed", "turns", "end_reason", "end_detail", "simulator_calls", "system_calls")


class TranscriptFileError(UnusableInput, ValueError):
    """A transcripts file that cannot be replayed; the message names the file, the line and the field."""


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


def read_transcripts(path: Path, scenarios: Sequence[Scenario]) -> list[Transcript]:
    """The transcripts of `path`, each checked against the scenario file's ids and turns."""
    if not path.is_file():
        raise TranscriptFileError(f"{path}: no transcripts file to replay (scenarios.replay_from names "
                                  "a transcripts.jsonl or the run folder holding one)")
    known = {s.id: s for s in scenarios}
    transcripts, problems = [], []
    for number, text in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            problems.append(f"line {number}: not JSON ({error.msg})")
            continue
        problem = _problem(record, known)
        if problem is not None:
            problems.append(f"line {number}: {problem}")
            continue
        transcripts.append(Transcript(**{key: record[key] for key in FIELDS}))
    if not problems and not transcripts:
        problems.append("it holds no transcript")
    if problems:
        raise TranscriptFileError(f"{path}: cannot be replayed:\n" + "\n".join(f"  - {p}" for p in problems[:20]))
    return transcripts


def _problem(record: Any, known: dict[str, Scenario]) -> str | None:
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = [key for key in FIELDS if key not in record]
    if missing:
        return f"field {missing[0]!r} is missing"
    if record["scenario_id"] not in known:
        return (f"field 'scenario_id': {record['scenario_id']!r} is not in the scenario file "
                "(replay the transcripts with the scenario file they were made from)")
    if record["end_reason"] not in END_REASONS:
        return f"field 'end_reason': {record['end_reason']!r} is not one of {', '.join(END_REASONS)}"
    turns = record["turns"]
    if not isinstance(turns, list) or not all(
            isinstance(t, dict) and t.get("role") in ("user", "assistant") and isinstance(t.get("content"), str)
            for t in turns):
        return "field 'turns': each turn must be {role: user | assistant, content: text}"
    if not isinstance(record["repeat"], int) or record["repeat"] < 0:
        return "field 'repeat': must be a whole number from 0"
    return None
