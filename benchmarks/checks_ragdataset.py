"""The fact check on real RAG answers: the first rows of rag-dataset-12000, looking for false flags.

The rows hold a question, a context and one answer; there is no second system's answer and no
rating, so each pairing below is built so that it is known which flags are false, or so that a
flag points at a fact a person can look up in the row:

- self: the answer against itself as the reference, with the row's context. Nothing can be
  wrong, so every flag is false.
- added: the answer with one of the context's own sentences appended, against the answer as the
  reference, with the context; once for each context sentence that states a fact. The added
  sentence is true by construction (the context says it), so every flag is false.
- reworded: the answer with each fact that has another common form written in it (25% as 25 per
  cent, a date's day after its month, a small count in words, $40 as 40 dollars), against the
  answer as the reference, with the context. The same facts: every flag is false.
- planted: the answer with one fact changed (a figure, else a weekday or a month), and apart
  the answer with one name replaced by a name of the context that it does not use, against the
  answer as the reference, with the context. A flag on the changed fact is right; a flag on
  anything else is false; a pass is a miss.
- extractive: the context's sentence that shares the most words with the answer, as the answer,
  against the answer as the reference, with the context: what an extractive system would say,
  its facts written as the context writes them. The sentence is true, but it may not answer the
  question; these flags are read by hand.
- grounded: the answer against a reference that states no fact, with the context. Each answer
  fact the context does not hold is flagged unsupported: a true flag when the answer states
  something the context does not (these answers were written by a model), a false one when the
  context does say it in a form the check does not read as the same. These are read by hand.

    .venv/bin/python benchmarks/checks_ragdataset.py [PARQUET] [--only PAIRING] [--show]

The data is not the project's (../shared/data/rag-dataset-12000/SOURCE.md: Apache-2.0, contexts
from Falcon RefinedWeb, ODC-By 1.0); nothing of it is written anywhere but this script's output.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ROOT  # noqa: E402

from evalbook.checks.facts import check_facts, extract_facts  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "rag-dataset-12000" / "train-first100.parquet"
COLUMNS = ("context", "question", "answer")
PAIRINGS = ("self", "added", "reworded", "planted", "extractive", "grounded")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"“A-Z0-9])|\n+")
LIST_NUMBER = re.compile(r"\(?\d{1,2}[.)]")
ABBREVIATION = re.compile(r"(?:^|[\s(])(?:[A-Z][a-z]{0,3}|(?:[A-Z]\.)+[A-Z]|[a-z]{1,3})\.$")
MAX_SENTENCE = 400  # longer "sentences" are tables or run-on lists, not what an answer adds
FIGURE = re.compile(r"\d+")
PLANTED_KINDS = ("number", "money", "percent", "quantity", "year", "date", "ordinal", "time")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")


@dataclass(frozen=True)
class Pairing:
    """One call of the fact check: which pairing, which row, the texts, and for a planted
    change the text put in the answer (a flag on anything else is false)."""

    pairing: str
    row: int
    answer: str
    reference: str
    context: str
    planted: str | None = None
    note: str = ""


def load_rows(path: Path) -> list[dict[str, str]]:
    """The rows of the parquet file, each with COLUMNS as strings; exit 2 with a clear message
    when the file is absent or lacks a column."""
    if not path.is_file():
        sys.exit(f"checks_ragdataset: no data at {path}; pass the path of rag-dataset-12000's "
                 "train-first100.parquet (see ../shared/data/rag-dataset-12000/SOURCE.md)")
    import pandas as pd

    frame = pd.read_parquet(path)
    absent = [column for column in COLUMNS if column not in frame.columns]
    if absent:
        sys.exit(f"checks_ragdataset: {path} has no column {', '.join(absent)} "
                 f"(it has {', '.join(map(str, frame.columns))})")
    return [{column: "" if row[column] is None else str(row[column]) for column in COLUMNS}
            for row in frame.to_dict("records")]


def sentences(text: str) -> list[str]:
    """The text's sentences, a line break ending one too. A piece that is only a list's number
    ("2.") or that ends on an abbreviation ("Dec.", "N.Y.") is joined to the next: cut there, it
    would be a fact the context does not state."""
    pieces, held = [], ""
    for part in SENTENCE_END.split(text):
        part = (part or "").strip()
        if not part:
            continue
        held = f"{held} {part}" if held else part
        if not (LIST_NUMBER.fullmatch(held) or ABBREVIATION.search(held)):
            pieces.append(held)
            held = ""
    return pieces + ([held] if held else [])


def _replace_whole(text: str, old: str, new: str) -> str:
    """`text` with every whole-word `old` replaced by `new`."""
    return re.sub(rf"(?<![\w]){re.escape(old)}(?![\w])", lambda _: new, text)


def _changed_figure(fact_text: str, answer: str, context: str) -> str | None:
    """The fact's text with its last figure raised to a value that neither the answer nor the
    context writes as a figure (so that the change is not a value of the document)."""
    runs = list(FIGURE.finditer(fact_text))
    if not runs:
        return None
    last = runs[-1].group()
    taken = set(FIGURE.findall(answer)) | set(FIGURE.findall(context))
    for step in (1, -1, 2, -2, 3, -3, 4, -4, 5, -5):
        figure = str(int(last) + step).zfill(len(last))
        if len(figure) == len(last) and not figure.startswith("-") and figure not in taken:
            return fact_text[:runs[-1].start()] + figure + fact_text[runs[-1].end():]
    return None


def planted_fact(index: int, row: dict[str, str]) -> Pairing | None:
    """The answer with its first figure changed (else its first weekday or month moved on by one),
    every time it is written."""
    answer, context = row["answer"], row["context"]
    for fact in extract_facts(answer):
        if fact.kind in PLANTED_KINDS:
            new = _changed_figure(fact.text, answer, context)
            if new is not None:
                return Pairing("planted", index, _replace_whole(answer, fact.text, new), answer, context,
                               new, f"{fact.kind}: {fact.text} -> {new}")
    for fact in extract_facts(answer):
        for table in (WEEKDAYS, MONTHS):
            word = next((w for w in table if fact.kind in ("weekday", "month", "date")
                         and fact.text.lower().startswith(w.lower())), None)
            if word is not None:
                new_word = table[(table.index(word) + 1) % len(table)]
                new = new_word + fact.text[len(word):]
                return Pairing("planted", index, _replace_whole(answer, fact.text, new), answer,
                               context, new, f"{fact.kind}: {fact.text} -> {new}")
    return None


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def planted_name(index: int, row: dict[str, str]) -> Pairing | None:
    """The answer with its first name of two words or more replaced, every time it is written, by
    the first such name of the context that shares no word with the answer and whose initials
    the answer does not write. The name replaced is one whose words the answer writes nowhere
    else: an answer that goes on to say "Lind" after "Maria Lind" keeps the name (a known miss,
    docs/checks.md), which tells nothing new."""
    answer, context = row["answer"], row["context"]
    answer_words = set(_words(answer))
    counts = Counter(_words(answer))

    def written_only_in_itself(name: str) -> bool:
        times = len(re.findall(rf"(?<!\w){re.escape(name)}(?!\w)", answer))
        return all(counts[word] == times for word in _words(name))

    names = [fact for fact in extract_facts(answer) if fact.kind == "name" and len(fact.text.split()) > 1
             and written_only_in_itself(fact.text)]
    if not names:
        return None
    for fact in extract_facts(context):
        words = _words(fact.text)
        if fact.kind == "name" and len(words) > 1 and "\n" not in fact.text \
                and not answer_words & set(words) and "".join(w[0] for w in words) not in answer_words:
            old = names[0].text
            return Pairing("planted", index, _replace_whole(answer, old, fact.text), answer, context,
                           fact.text, f"name: {old} -> {fact.text}")
    return None


def extractive(index: int, row: dict[str, str]) -> Pairing | None:
    """The context's sentence that shares the most words with the answer, as the answer, against
    the dataset answer as the reference: an extractive system's answer, true by construction, whose
    facts are written as the context writes them (for a figure, often not as the reference does)."""
    answer_words = set(_words(row["answer"]))
    scored = [(len(answer_words & set(_words(sentence))), sentence) for sentence in sentences(row["context"])
              if len(sentence) <= MAX_SENTENCE and extract_facts(sentence)]
    if not scored:
        return None
    sentence = max(scored, key=lambda pair: pair[0])[1]
    return Pairing("extractive", index, sentence, row["answer"], row["context"])


NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
                "nineteen", "twenty")
PERCENT = re.compile(r"(\d[\d.,]*)\s*(?:%|per ?cent)", re.I)
DAY_MONTH_YEAR = re.compile(rf"(\d{{1,2}}) ({'|'.join(MONTHS)}),? (\d{{4}})")
MONTH_DAY_YEAR = re.compile(rf"({'|'.join(MONTHS)}) (\d{{1,2}}),? (\d{{4}})")
DOLLARS = re.compile(r"\$(\d{1,3}(?:,\d{3})*)(?![\d.,]*\s*(?:[mb]illion|[MBK]\b))")


def reworded_form(text: str) -> str | None:
    """One fact as written, in another form of the same value: 25% and 25 per cent, a date with
    its day before or after the month, a small count in digits and in words, $40 and 40 dollars."""
    if PERCENT.fullmatch(text):
        figure = PERCENT.fullmatch(text).group(1)
        return f"{figure} per cent" if text.endswith("%") else f"{figure}%"
    if match := DAY_MONTH_YEAR.fullmatch(text):
        return f"{match[2]} {match[1]}, {match[3]}"
    if match := MONTH_DAY_YEAR.fullmatch(text):
        return f"{match[2]} {match[1]} {match[3]}"
    if match := DOLLARS.fullmatch(text):
        return f"{match[1]} dollars"
    if text.isdigit() and 2 <= int(text) <= 20:
        return NUMBER_WORDS[int(text)]
    if text.lower() in NUMBER_WORDS[2:]:
        return str(NUMBER_WORDS.index(text.lower()))
    return None


def reworded(index: int, row: dict[str, str]) -> Pairing | None:
    """The answer with every fact that has another common form written in that form, against the
    answer as the reference: the same facts, so every flag is false."""
    answer = row["answer"]
    changes = [(fact, form) for fact in extract_facts(answer) if fact.kind != "name"
               and (form := reworded_form(fact.text)) is not None]
    if not changes:
        return None
    text = answer
    for fact, form in sorted(changes, key=lambda change: -change[0].start):
        text = text[:fact.start] + form + text[fact.end:]
    return Pairing("reworded", index, text, answer, row["context"],
                   note="; ".join(f"{fact.text} -> {form}" for fact, form in changes))


def pairings(rows: list[dict[str, str]], only: set[str]) -> list[Pairing]:
    made = []
    for index, row in enumerate(rows):
        answer, context = row["answer"], row["context"]
        if "self" in only:
            made.append(Pairing("self", index, answer, answer, context))
        if "added" in only:
            for sentence in sentences(context):
                if len(sentence) <= MAX_SENTENCE and extract_facts(sentence):
                    # a list's item goes on a line of its own, as the context and an answer write it
                    joint = "\n" if LIST_NUMBER.match(sentence) else " "
                    made.append(Pairing("added", index, f"{answer}{joint}{sentence}", answer, context,
                                        note=f"added context sentence {sentence[:40]!r}..."))
        if "planted" in only:
            made += [p for p in (planted_fact(index, row), planted_name(index, row)) if p is not None]
        if "reworded" in only:
            made += [p for p in (reworded(index, row),) if p is not None]
        if "extractive" in only:
            made += [p for p in (extractive(index, row),) if p is not None]
        if "grounded" in only:
            made.append(Pairing("grounded", index, answer, "", context))
    return made


def problems(details: dict) -> list[str]:
    """The answer facts a failing outcome names (changed or unsupported)."""
    return [entry["answer"] for entry in details["changed"] + details["unsupported"]]


def judge(pairing: Pairing, outcome) -> str:
    """What the script can tell alone: 'pass', 'false' (a flag that cannot be right), 'true' (the
    planted change flagged and nothing else), 'miss' (the planted change passed) or 'read' (an
    extractive or grounded flag, for a person to read)."""
    if outcome.status != "fail":
        return "miss" if pairing.planted is not None else "pass"
    if pairing.pairing in ("self", "added", "reworded"):
        return "false"
    if pairing.planted is not None:
        named = problems(outcome.details)
        return "true" if named and all(text == " ".join(pairing.planted.split()) for text in named) else "false"
    return "read"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="the parquet file")
    parser.add_argument("--only", action="append", choices=PAIRINGS, help="run only these pairings")
    parser.add_argument("--show", action="store_true", help="print the texts of each flagged pairing")
    args = parser.parse_args(argv)

    rows = load_rows(args.data)
    made = pairings(rows, set(args.only or PAIRINGS))
    verdicts: Counter = Counter()
    print(f"{len(rows)} rows of {args.data.name}; {len(made)} pairings")
    for pairing in made:
        outcome = check_facts(pairing.answer, pairing.reference, pairing.context)
        verdict = judge(pairing, outcome)
        verdicts[pairing.pairing, verdict] += 1
        if verdict in ("false", "read", "miss"):
            print(f"[{pairing.pairing} row {pairing.row}] {verdict}: {outcome.status}: {outcome.reason}"
                  + (f"  ({pairing.note})" if pairing.note else ""))
            if args.show:
                print(f"    answer: {pairing.answer}\n    reference: {pairing.reference}")
    print()
    for name in PAIRINGS:
        counted = {verdict: n for (pairing, verdict), n in sorted(verdicts.items()) if pairing == name}
        if counted:
            print(f"{name}: {sum(counted.values())} pairings, "
                  + ", ".join(f"{verdict} {n}" for verdict, n in counted.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
