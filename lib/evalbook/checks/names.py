"""Names for the fact check: capitalised spans, by rules (no model).

A name is a run of capitalised words ("Gustave Eiffel", "Bank of England", "AT&T", "U.S."),
without the function words that may lead it ("In Paris" is Paris) and never across a sentence's
end. The first word of a sentence alone is no name ("Spiders have eight legs"), unless the row
writes it capitalised inside a sentence too. Names are compared as lower-case words without
punctuation or a possessive 's, and one holds another when its words stand together in the other
text, when either's words are all in the other ("Dr. Smith" and "Smith"), or when one is the
other's initials ("US" and "United States").
"""

from __future__ import annotations

import re
from typing import Callable

from evalbook.checks.found import Found

CAPITAL_WORD = r"(?:[A-ZÀ-ÖØ-Þ][\w'’&.\-]*|[a-z]+[A-Z][\w'’&.\-]*)"
CONNECTORS = {"of", "the", "de", "du", "da", "di", "del", "della", "der", "den", "van", "von", "la", "le", "al",
              "bin", "ibn", "&", "and"}
SPAN = re.compile(rf"{CAPITAL_WORD}(?:[ \t]+(?:(?:of|of the|de|du|da|di|del|della|der|den|van|von|la|le|al"
                  rf"|bin|ibn|&)[ \t]+)?{CAPITAL_WORD})*")
CHUNK = re.compile(r"\S+")
TITLES = {"dr", "mr", "mrs", "ms", "prof", "st", "sr", "jr", "mt", "gen", "col", "capt", "lt", "sgt", "rev",
          "hon", "gov", "sen", "rep", "pres", "no", "vs", "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr",
          "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"}
# capitalised words that lead or end a span without being part of a name
STOPWORDS = set("""a an the in on at of for and but or nor to from with by into onto upon about as this that these
those it its it's he she they we you i i'm i've i'd his her their our your my me him them us if when while after
before since during yes no not there here what which who whom whose where why how some many most all each every
both either neither also however although though so then thus therefore hence according because unlike like is
are was were be been being do does did can could should would will may might must shall overall today yesterday
tomorrow currently generally typically usually finally first second third additionally furthermore moreover
meanwhile instead otherwise other another such any several few more less only just even still yet once please
note see answer question example examples based given let here's there's what's that's it’s i’m""".split())
SKIPPED_BEFORE = set(" \t\r\"'“”‘’([{*•·–—-#>|\x00")
LIST_ITEM = re.compile(r"\(?(?:\d{1,2}|[a-zA-Z]|[ivx]{1,4})\)")
# a people's adjective and its place, both ways ("French" and "France"); compared in lower case
DEMONYMS = {
    "american": "america", "british": "britain", "english": "england", "scottish": "scotland", "welsh": "wales",
    "irish": "ireland", "french": "france", "german": "germany", "italian": "italy", "spanish": "spain",
    "portuguese": "portugal", "dutch": "netherlands", "belgian": "belgium", "swiss": "switzerland",
    "austrian": "austria", "swedish": "sweden", "norwegian": "norway", "danish": "denmark", "finnish": "finland",
    "polish": "poland", "greek": "greece", "turkish": "turkey", "russian": "russia", "ukrainian": "ukraine",
    "chinese": "china", "japanese": "japan", "korean": "korea", "indian": "india", "pakistani": "pakistan",
    "australian": "australia", "canadian": "canada", "mexican": "mexico", "brazilian": "brazil",
    "argentine": "argentina", "argentinian": "argentina", "egyptian": "egypt", "nigerian": "nigeria",
    "kenyan": "kenya", "african": "africa", "european": "europe", "asian": "asia", "israeli": "israel",
    "iranian": "iran", "iraqi": "iraq", "thai": "thailand", "vietnamese": "vietnam", "indonesian": "indonesia",
    "filipino": "philippines", "tasmanian": "tasmania", "texan": "texas", "californian": "california",
    "hungarian": "hungary", "czech": "czechia", "romanian": "romania", "scandinavian": "scandinavia",
}
COUNTRY_WORDS = {people: (place,) for people, place in DEMONYMS.items()} | {
    place: tuple(people for people, its in DEMONYMS.items() if its == place) for place in set(DEMONYMS.values())}
POSSESSIVE = re.compile(r"['’]s\b")
ACRONYM_PLURAL = re.compile(r"\b([A-Z]{2,})s\b")  # "APIs" is API, as "API's" is
PUNCTUATION = str.maketrans("", "", ".'’")
WORD = re.compile(r"[^\W_]+(?:&[^\W_]+)*")
SHOUTED_BEFORE = re.compile(r"(?<![^\W\d_])(?P<word>[A-Z]{2,})[ \t]+$")


def normal_words(text: str) -> list[str]:
    """The words of a name or a text as compared: no possessive 's, no dots or apostrophes, no
    plural s after an acronym ("U.S." is US, "O'Brien's" is OBrien, "APIs" is API), case kept."""
    return WORD.findall(ACRONYM_PLURAL.sub(r"\1", POSSESSIVE.sub("", text)).translate(PUNCTUATION))


def abbreviation(word: str) -> bool:
    """Whether a word ending in "." is an abbreviation rather than a sentence's end."""
    bare = word.rstrip(".").lower()
    return bare in TITLES or "." in bare or (len(bare) == 1 and bare.isalpha())


def sentence_start(text: str, position: int) -> bool:
    """Whether a sentence (or a line, a heading, a list item) starts at `position`."""
    index = position - 1
    while index >= 0 and text[index] in SKIPPED_BEFORE:
        index -= 1
    if index < 0:
        return True
    char = text[index]
    if char in "\n!?…":
        return True
    if char == ")":  # a list item: "3) Wait", "(b) Pay"
        begin = index
        while begin > 0 and not text[begin - 1].isspace():
            begin -= 1
        return LIST_ITEM.fullmatch(text, begin, index + 1) is not None
    if char == ".":
        begin = index
        while begin > 0 and not text[begin - 1].isspace():
            begin -= 1
        return not abbreviation(text[begin:index + 1])
    return False


def name(text: str, start: int, end: int) -> Found:
    words = normal_words(text[start:end])
    value = ("name", " ".join(words).lower())
    return Found("name", value, start, end, frozenset({value}), frozenset({value}), "name",
                 (tuple(word.lower() for word in words), " ".join(words)))


def scan_names(text: str, masked: str) -> tuple[list[Found], list[Found]]:
    """The names of a text and, apart, the single capitalised words that start a sentence (names
    only if the text or its row writes them capitalised inside a sentence too). `masked` is the text
    with its other facts blanked."""
    names: list[Found] = []
    initials: list[Found] = []
    for match in SPAN.finditer(masked):
        span, offset = match.group(), match.start()
        chunks = [(0, span)] if " " not in span and "\t" not in span else [
            (chunk.start(), chunk.group()) for chunk in CHUNK.finditer(span)]
        run: list[tuple[int, int, str]] = []
        for position, word in chunks:
            start = offset + position
            ends_sentence = word[-1] == "." and not abbreviation(word)
            kept = word.rstrip("'’-" if word[-1] == "." and not ends_sentence else ".'’-")
            if kept:
                run.append((start, start + len(kept), kept.rstrip(".").lower()))
            if ends_sentence:
                _close(text, run, names, initials)
                run = []
        _close(text, run, names, initials)
    known = {word for found in names for word in found.extra[0]}
    return names, [found for found in initials if not _promote(found, known, names)]


def _promote(found: Found, known: set, names: list) -> bool:
    if found.extra[0][0] in known:
        names.append(found)
        return True
    return False


def _close(text: str, run: list, names: list, initials: list) -> None:
    """One run of capitalised words (start, end, lower case) as a name, without the function
    words that lead or end it."""
    first, last = 0, len(run)
    while first < last and (run[first][2] in STOPWORDS or run[first][2] in CONNECTORS):
        first += 1
    while last > first and (run[last - 1][2] in STOPWORDS or run[last - 1][2] in CONNECTORS):
        last -= 1
    if first == last:
        return
    start, end = run[first][0], run[last - 1][1]
    word = text[start:end]
    if len(word) == 1:
        return  # "B", "I": a letter alone names nothing to check
    acronym = len(word) > 1 and word.isupper() and word.isalpha()  # "NASA launched it": a name
    # "THE GROWTH of ...": a lede in capitals, its first word a function word; the word is no acronym
    shouted = acronym and first > 0 and all(len(kept) > 1 and text[begin:end].isupper()
                                            for begin, end, kept in run[:first])
    if last - first == 1 and (not first or shouted) and (not acronym or shouted) \
            and sentence_start(text, run[0][0]):
        if not WORD.search(text, start, end):
            return
        initials.append(name(text, start, end))
    elif WORD.search(text, start, end):
        names.append(name(text, start, end))


def capitalised_inside_a_sentence(word: str, text: str) -> bool:
    """Whether `text` writes `word` capitalised somewhere other than at a sentence's start."""
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        if (not (start and (text[start - 1].isalnum() or text[start - 1] in "'’"))
                and not (end < len(text) and text[end].isalnum()) and not sentence_start(text, start)
                and not (word.isupper() and _after_a_shouted_start(text, start))):
            return True
        start = text.find(word, end)
    return False


def _after_a_shouted_start(text: str, start: int) -> bool:
    """Whether the word at `start` follows a function word in capitals that starts a sentence
    ("THE GROWTH of"): a lede's style, not a name written inside a sentence."""
    before = SHOUTED_BEFORE.search(text, max(0, start - 12), start)
    return bool(before and before["word"].lower() in STOPWORDS | CONNECTORS
                and sentence_start(text, before.start("word")))


def streams(text: str) -> tuple[str, str]:
    """A text's words as compared, in order, with their case and in lower case, each word with a
    space either side, for finding a name's words together."""
    words = " ".join(normal_words(text))
    return f" {words} ", f" {words.lower()} "


def initials_of(words: tuple[str, ...]) -> str:
    return "".join(word[0] for word in words if word not in CONNECTORS)


def _initials_across_and(names: list[Found], with_case: str) -> set[str]:
    """The initials of names joined by "and" ("National Aeronautics and Space Administration" is
    two spans, NASA one)."""
    joined = set()
    for one, other in zip(names, names[1:]):
        together = f" {one.extra[1]} and {other.extra[1]} "
        if together in with_case:
            joined.add(initials_of(one.extra[0] + other.extra[0]))
    return joined


def held_name(found: Found, text_names: Callable[[], list[Found]],
              text_streams: Callable[[], tuple[str, str]]) -> bool:
    """Whether a text holds the name: its words together there (a short one in its own case: "US"
    is not "us"), one of the text's `names` whose words are all in it or hold all of it, or the
    initials of one; a people's adjective and its country hold each other ("French", "France")."""
    words, cased = found.extra
    if _held_words(words, cased, text_names, text_streams):
        return True
    return any(_held_words((other,), other, text_names, text_streams)
               for other in COUNTRY_WORDS.get(" ".join(words), ()))


def _held_words(words: tuple[str, ...], cased: str, text_names: Callable[[], list[Found]],
                text_streams: Callable[[], tuple[str, str]]) -> bool:
    joined = " ".join(words)
    with_case, lower = text_streams()
    if len(words) == 1 and len(joined) <= 3:
        if f" {cased} " in with_case:
            return True
    elif f" {joined} " in lower:
        return True
    names = text_names()
    mine = set(words) - TITLES
    for other in names:
        theirs = set(other.extra[0]) - TITLES
        if theirs and mine and (theirs <= mine or mine <= theirs):
            return True
    acronym = len(words) == 1 and cased.isupper() and 2 <= len(cased) <= 6
    if acronym and joined in _initials_across_and(names, with_case):
        return True
    for other in names:
        other_words, other_cased = other.extra
        if acronym and len(other_words) > 1 and initials_of(other_words) == joined:
            return True
        if (len(other_words) == 1 and other_cased.isupper() and len(words) > 1
                and initials_of(words) == other_words[0]):
            return True
    return False
