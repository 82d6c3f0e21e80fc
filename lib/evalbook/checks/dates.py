"""Dates, times, years, weekdays and months for the fact check, by regular expressions and tables.

A date is ("date", year, month, day) with None for what the text leaves out, so that "9 November"
and "November 1989" are parts of "9 November 1989", which provides them (and its year, month and
weekday). A time is ("time", hour, minute) on the 24-hour clock when the text says which half of
the day, else ("time12", hour, minute), which either half holds. A numeric date whose day and month
could be either way round (03/04/2020) is read day first and held by either reading.
"""

from __future__ import annotations

import datetime
import re

from evalbook.checks.found import Found, Scan
from evalbook.checks.numbers import alternation

MONTHS = {"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
          "september": 9, "october": 10, "november": 11, "december": 12}
MONTH_ABBREVIATIONS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
                       "sept": 9, "oct": 10, "nov": 11, "dec": 12}
WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
HOUR_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
              "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
MINUTE_WORDS = {"five": 5, "ten": 10, "twenty": 20, "twenty-five": 25, "twenty five": 25}

ANY_MONTH = rf"(?P<month>(?i:{alternation(MONTHS)}|(?:{alternation(MONTH_ABBREVIATIONS)})\b\.?))"
# without a year, only a capitalised month makes a date ("may 5" is not one)
MONTHS_CAP = [name.capitalize() for name in MONTHS]
CAPITAL_MONTH = (rf"(?P<month>(?:{alternation(MONTHS_CAP)})\b|"
                 rf"(?:{alternation(name.capitalize() for name in MONTH_ABBREVIATIONS)})\b\.?)")
DAY_WORDS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
             "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
             "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
             "twentieth": 20, "thirtieth": 30}
DAY_WORDS |= {f"twenty{joint}{word}": 20 + value for word, value in list(DAY_WORDS.items())[:9]
              for joint in ("-", " ")} | {"thirty-first": 31, "thirty first": 31}
DAY = rf"(?:(?P<day>[0-3]?\d)(?:st|nd|rd|th)?|(?P<day_word>(?i:{alternation(DAY_WORDS)}))\b)"
YEAR = r"(?P<year>\d{4})"

ISO_DATE = re.compile(rf"(?<![\w/.-]){YEAR}(?P<sep>[-/.])(?P<month>[01]?\d)(?P=sep)(?P<day>[0-3]?\d)"
                      r"(?![\d/]|[.-]\d|[A-SU-Za-z])")  # a T may follow: 1989-11-09T21:00
NUMERIC_DATE = re.compile(r"(?<![\w/.-])(?P<first>[0-3]?\d)(?P<sep>[/.-])(?P<second>[0-3]?\d)(?P=sep)"
                          r"(?P<year>\d{4})(?![\w/]|[.-]\d)")
DAY_MONTH_YEAR = re.compile(rf"\b(?:the\s+)?{DAY}\s+(?:of\s+)?{ANY_MONTH},?\s+{YEAR}\b")
MONTH_DAY_YEAR = re.compile(rf"\b{ANY_MONTH}\s+(?:the\s+)?{DAY},?\s+{YEAR}\b")
DAY_MONTH = re.compile(rf"\b(?:the\s+)?{DAY}\s+(?:of\s+)?{CAPITAL_MONTH}")
MONTH_DAY = re.compile(rf"\b{CAPITAL_MONTH}\s+(?:the\s+)?{DAY}\b(?![.,:]?\d)")
MONTH_YEAR = re.compile(rf"\b{CAPITAL_MONTH},?\s+{YEAR}\b")
# "from 1 to 28 February", "1-28 Feb": the range's first day is a date of the same month
DAY_RANGE_MONTH = re.compile(rf"\b(?P<first_day>[0-3]?\d)(?:st|nd|rd|th)?\s*(?:[-\u2013]|to|until|till|and)\s*"
                             rf"(?:the\s+)?{DAY}\s+(?:of\s+)?{CAPITAL_MONTH}")
DECADE = re.compile(r"(?<![\w.,])(?P<decade>\d{3}0)['’]?s\b")
ERA = re.compile(r"(?<![\w.,])(?:(?P<year>\d{1,4})\s*(?P<era>BCE|BC|B\.C\.|AD|A\.D\.|CE)(?![\w])|"
                 r"\b(?P<era_before>AD|A\.D\.)\s*(?P<year_after>\d{1,4})\b)")


def _found(kind, value, start, end, needs, provides, family) -> Found:
    return Found(kind, value, start, end, frozenset(needs), frozenset(provides), family)


def month_number(text: str) -> int:
    word = text.rstrip(".").lower()
    return MONTHS.get(word) or MONTH_ABBREVIATIONS[word]


def date_keys(year: int | None, month: int, day: int | None) -> set:
    """What a date gives another text: itself and every part of it, and its weekday."""
    keys = {("date", year, month, day), ("month", month)}
    if year is not None:
        keys |= {("date", year, month, None), ("year", year), ("decade", year // 10 * 10)}
    if day is not None:
        keys.add(("date", None, month, day))
        if year is not None:
            keys.add(("weekday", datetime.date(year, month, day).weekday()))
    return keys


def valid(year: int | None, month: int, day: int | None) -> bool:
    try:
        datetime.date(2000 if year is None else year, month, 1 if day is None else day)
    except ValueError:
        return False
    return True


def date(readings: list[tuple], start: int, end: int) -> Found:
    """A date from its readings (two for 03/04/2020), the first being its value."""
    provides = set().union(*(date_keys(*reading) for reading in readings))
    needs = {("date", *reading) for reading in readings}
    return _found("date", ("date", *readings[0]), start, end, needs, provides, "date")


MONTH_LEX = frozenset(MONTHS) | frozenset(MONTH_ABBREVIATIONS)
ERA_WORDS = ("BC", "AD", "CE", "B.C", "A.D")


DAY_LEX = frozenset(word.split("-")[0].split()[0] for word in DAY_WORDS) | {"the"}


def _day(match: re.Match) -> int:
    return int(match["day"]) if match["day"] else DAY_WORDS[" ".join(match["day_word"].lower().split())]


def scan_dates(scan: Scan) -> None:
    digits = scan.digit_starts()
    months = scan.word_starts(MONTH_LEX)
    for match in scan.anchored(ISO_DATE, digits):
        year, month, day = int(match["year"]), int(match["month"]), int(match["day"])
        if valid(year, month, day):
            scan.add(date([(year, month, day)], match.start(), match.end()))
            if scan.text.startswith("T", match.end()):
                scan.take(match.end(), match.end() + 1)  # 1989-11-09T21:00: the T is no name
    for match in scan.anchored(NUMERIC_DATE, digits):
        first, second, year = int(match["first"]), int(match["second"]), int(match["year"])
        readings = [reading for reading in ((year, second, first), (year, first, second)) if valid(*reading)]
        if readings:
            scan.add(date(list(dict.fromkeys(readings)), match.start(), match.end()))
    day_starts = sorted(digits + scan.word_starts(DAY_LEX)) if months else ()
    for pattern, starts in ((DAY_MONTH_YEAR, day_starts), (MONTH_DAY_YEAR, months)):
        for match in scan.anchored(pattern, starts):
            reading = (int(match["year"]), month_number(match["month"]), _day(match))
            if valid(*reading):
                scan.add(date([reading], match.start(), match.end()))
    for match in (scan.anchored(DAY_RANGE_MONTH, digits) if months else ()):
        reading = (None, month_number(match["month"]), int(match["first_day"]))
        if valid(*reading) and valid(None, reading[1], _day(match)):
            scan.add(date([reading], match.start(), match.end("first_day")))
    for pattern, starts in ((DAY_MONTH, day_starts), (MONTH_DAY, months)):
        for match in scan.anchored(pattern, starts):
            reading = (None, month_number(match["month"]), _day(match))
            if valid(*reading):
                scan.add(date([reading], match.start(), match.end()))
    for match in scan.anchored(MONTH_YEAR, months):
        scan.add(date([(int(match["year"]), month_number(match["month"]), None)], match.start(), match.end()))
    for match in scan.anchored(DECADE, digits):
        key = ("decade", int(match["decade"]))
        scan.add(_found("year", key, match.start(), match.end(), {key}, {key}, "year"))
    for match in (scan.free_matches(ERA) if any(era in scan.text for era in ERA_WORDS) else ()):
        era = (match["era"] or match["era_before"]).replace(".", "")
        year = int(match["year"] or match["year_after"]) * (-1 if era.startswith("B") else 1)
        key = ("year", year)
        scan.add(_found("year", key, match.start(), match.end(), {key}, {key, ("number", abs(year))}, "year"))


# ---------------------------------------------------------------- times

# "p.m." takes its last dot; "3pm." leaves the sentence its full stop
MERIDIEM = r"(?P<meridiem>[aApP])(?:\.\s?[mM]\.?|\s?[mM]\b)"
HOUR_WORD = alternation(HOUR_WORDS)
CLOCK = re.compile(rf"(?<![\d:.,])(?P<hour>[01]?\d|2[0-4])(?P<sep>[:.])(?P<minute>[0-5]\d)(?::[0-5]\d)?"
                   rf"(?![\d]|[:.]\d)(?:\s*{MERIDIEM})?")
HOUR_MERIDIEM = re.compile(rf"(?<![\w.,:])(?P<hour>1[0-2]|0?[1-9]|(?i:{HOUR_WORD}))\s*{MERIDIEM}")
PART_OF_DAY = {"morning": "a", "afternoon": "p", "evening": "p", "night": "p"}
HOUR_PART_OF_DAY = re.compile(rf"(?<![\w.,:])(?P<hour>1[0-2]|0?[1-9]|(?i:{HOUR_WORD}))(?:\s+o['’]\s?clock)?"
                              rf"\s+in\s+the\s+(?P<part>(?i:{alternation(PART_OF_DAY)}))\b")
# 21.00 is a time only where a time is expected ("at 21.00"); elsewhere it is a number or a price
TIME_BEFORE_DOT = {"at", "from", "until", "till", "by", "before", "after", "between", "and", "to", "around"}
OCLOCK = re.compile(rf"(?<![\w.,:])(?P<hour>1[0-2]|0?[1-9]|(?i:{HOUR_WORD}))\s+o['’]\s?clock\b")
PAST_TO = re.compile(
    rf"(?i:\b(?P<minutes>half|(?:a\s+)?quarter|{alternation(MINUTE_WORDS)}|[1-5]?\d)(?P<unit>\s+minutes?)?"
    rf"\s+(?P<relation>past|after|to)\s+(?P<hour>1[0-2]|[1-9]|{HOUR_WORD})\b)(?:\s*{MERIDIEM})?")
NOON = re.compile(r"(?i:\b(?:12\s*(?:o['’]clock\s+)?)?(?P<word>noon|midday|midnight)\b)")


def time(hour: int, minute: int, start: int, end: int, twelve_hour: bool) -> Found:
    """A time; on the 12-hour clock (no a.m. or p.m. said) either half of the day holds it."""
    hours = {hour % 12, hour % 12 + 12} if twelve_hour else {hour % 24}
    needs = {("time", h, minute) for h in hours}
    provides = set(needs)
    if minute == 0:  # "9-5" and "9 a.m. to 5 p.m." hold each other
        clock = hour % 12 or 12
        needs.add(("bare", clock))
        provides |= {("number", clock), ("number", hour % 24)}
    value = ("time12", hour % 12 or 12, minute) if twelve_hour else ("time", hour % 24, minute)
    return _found("time", value, start, end, needs, provides, "time")


def _hour(text: str) -> int:
    return int(text) if text.isdigit() else HOUR_WORDS[text.lower()]


def _meridiem(hour: int, meridiem: str | None) -> tuple[int, bool]:
    """The hour on the 24-hour clock and whether it is still open to either half of the day."""
    if not meridiem:
        return hour, True
    hour %= 12
    return (hour + 12 if meridiem.lower() == "p" else hour), False


PAST_TO_LEX = frozenset({"half", "quarter", "a"} | {word.split()[0] for word in MINUTE_WORDS})
NOON_WORDS = ("noon", "midday", "midnight")


def scan_times(scan: Scan) -> None:
    digits = scan.digit_starts()
    noon = any(word in scan.lower for word in NOON_WORDS)
    for match in (scan.free_matches(NOON) if noon else ()):
        scan.add(time(0 if match["word"].lower() == "midnight" else 12, 0, match.start(), match.end(), False))
    for match in scan.anchored(CLOCK, digits):
        hour, minute, meridiem = int(match["hour"]), int(match["minute"]), match["meridiem"]
        expected = _previous_word(scan.text, match.start()).lower() in TIME_BEFORE_DOT
        if match["sep"] == "." and not meridiem and not expected:
            continue  # 3.45 is a number unless a.m. or p.m. follows or "at" comes before
        if meridiem:
            if not 1 <= hour <= 12:
                continue
            hour, open_half = _meridiem(hour, meridiem)
        else:
            # 09:30 and 13:05 are on the 24-hour clock; 9:30 and 12:00 may be either half
            open_half = 1 <= hour <= 12 and not match["hour"].startswith("0")
        scan.add(time(hour, minute, match.start(), match.end(), open_half))
    hours = sorted(digits + scan.word_starts(HOUR_WORDS))
    for match in scan.anchored(HOUR_PART_OF_DAY, hours):
        meridiem = PART_OF_DAY[match["part"].lower()]
        hour = _hour(match["hour"])
        if meridiem == "p" and hour < 5 and match["part"].lower() == "night":
            meridiem = "a"  # "2 in the night"
        hour, open_half = _meridiem(hour, meridiem)
        scan.add(time(hour, 0, match.start(), match.end(), open_half))
    for match in scan.anchored(HOUR_MERIDIEM, hours):
        hour, open_half = _meridiem(_hour(match["hour"]), match["meridiem"])
        scan.add(time(hour, 0, match.start(), match.end(), open_half))
    for match in scan.anchored(PAST_TO, sorted(digits + scan.word_starts(PAST_TO_LEX))):
        minutes_text, relation = match["minutes"].lower(), match["relation"].lower()
        if minutes_text == "half":
            minutes = 30
        elif minutes_text.endswith("quarter"):
            minutes = 15
        else:
            minutes = int(minutes_text) if minutes_text.isdigit() else MINUTE_WORDS[minutes_text]
            if relation == "to" and not match["unit"]:
                continue  # "five to ten" is as often a range as a time
        if minutes_text == "half" and relation == "to":
            continue
        hour = _hour(match["hour"])
        if relation == "to":
            hour, minutes = (hour - 1) or 12, 60 - minutes
        hour, open_half = _meridiem(hour, match["meridiem"])
        scan.add(time(hour, minutes, match.start(), match.end(), open_half))
    for match in scan.anchored(OCLOCK, hours if "clock" in scan.lower else ()):
        scan.add(time(_hour(match["hour"]), 0, match.start(), match.end(), True))


# ---------------------------------------------------------------- weekdays and months

WEEKDAY = re.compile(rf"\b(?P<day>{alternation(d.capitalize() for d in WEEKDAYS)}|{alternation(WEEKDAYS)})"
                     r"(?P<plural>s)?\b(?:['’]s)?")
# a weekday in a holiday's or a paper's name is the name ("Good Friday", "the Sunday Times")
HOLIDAY_WORDS = {"good", "black", "easter", "palm", "ash", "super", "cyber", "holy", "maundy", "bloody",
                 "whit", "shrove", "fat", "giving", "great", "blue"}
CAPITALISED_NEXT = re.compile(r"[ \t]+(?P<word>[A-Z][\w'’]*)")
WEEKDAY_LEX = frozenset(WEEKDAYS) | frozenset(day + "s" for day in WEEKDAYS)
MONTH_ALONE = re.compile(rf"\b(?P<month>{alternation(MONTHS_CAP)})\b")
MONTH_ABBREVIATION_ALONE = re.compile(
    rf"\b(?P<month>{alternation(name.capitalize() for name in MONTH_ABBREVIATIONS)})\b\.?")
# May, March and August are also a verb, a verb and an adjective: a month only after one of these
TIME_WORDS = {"in", "of", "since", "until", "till", "by", "from", "during", "early", "late", "mid", "last",
              "next", "this", "each", "every", "through", "throughout", "before", "after", "between", "and",
              "or", "to", "around", "on", "for", "that", "in-", "end"}
SOMETIMES_MONTHS = {"May", "March", "August"}
PREVIOUS_WORD = re.compile(r"([^\W\d_]+)[\s\-]*$")


def weekday(day: int, start: int, end: int) -> Found:
    key = ("weekday", day)
    return _found("weekday", key, start, end, {key}, {key}, "weekday")


def _next_is_name(text: str, end: int) -> bool:
    """Whether a capitalised word other than a month or a weekday follows at once."""
    following = CAPITALISED_NEXT.match(text, end)
    if not following:
        return False
    word = following["word"].lower().rstrip("'’s")
    return word not in MONTHS and word not in MONTH_ABBREVIATIONS and word not in WEEKDAYS


def _previous_word(text: str, start: int) -> str:
    previous = PREVIOUS_WORD.search(text, max(0, start - 20), start)
    return previous.group(1) if previous else ""


def scan_weekdays(scan: Scan) -> None:
    text = scan.text
    for match in scan.anchored(WEEKDAY, scan.word_starts(WEEKDAY_LEX)):
        if _next_is_name(text, match.end()) or _previous_word(text, match.start()).lower() in HOLIDAY_WORDS:
            continue
        scan.add(weekday(WEEKDAYS[match["day"].lower()], match.start(), match.end("plural") if match["plural"]
                         else match.end("day")))


WEEKDAY_ABBREVIATIONS = {"Mon": 0, "Tue": 1, "Tues": 1, "Wed": 2, "Thu": 3, "Thur": 3, "Thurs": 3, "Fri": 4,
                         "Sat": 5, "Sun": 6}
WEEKDAY_ABBREVIATION = re.compile(rf"(?P<day>{alternation(WEEKDAY_ABBREVIATIONS)})\b\.?")
# "Sun", "Sat" and "Wed" are words and a paper too: a weekday only beside another weekday or a day
ALSO_WORDS = {"Sun", "Sat", "Wed"}
NEAR_WEEKDAY = re.compile(rf"(?i:\b(?:{alternation(WEEKDAYS)}|{alternation(WEEKDAY_ABBREVIATIONS)})\b)")


def scan_weekday_abbreviations(scan: Scan, sentence_start) -> None:
    """Mon, Tue., Thurs: capitalised, not starting a sentence, not before a name."""
    text = scan.text
    lexicon = {abbreviation.lower() for abbreviation in WEEKDAY_ABBREVIATIONS}
    for match in scan.anchored(WEEKDAY_ABBREVIATION, scan.word_starts(lexicon)):
        day = match["day"]
        if sentence_start(text, match.start()) or _next_is_name(text, match.end()):
            continue
        if day in ALSO_WORDS and not (
                _previous_word(text, match.start()).lower() in TIME_WORDS  # "on Sat", "the last Sat."
                or NEAR_WEEKDAY.search(text, max(0, match.start() - 12), match.start())
                or NEAR_WEEKDAY.search(text, match.end(), match.end() + 12)
                or re.match(r"\s*,?\s*\d", text[match.end():match.end() + 4])):
            continue
        scan.add(weekday(WEEKDAY_ABBREVIATIONS[day], match.start(), match.end("day")))


def scan_months(scan: Scan, sentence_start) -> None:
    text = scan.text
    for match in scan.anchored(MONTH_ALONE, scan.word_starts(MONTHS)):
        name = match["month"]
        if _next_is_name(text, match.end()):
            continue  # "April Smith", "June Carter"
        if name in SOMETIMES_MONTHS and (_previous_word(text, match.start()).lower() not in TIME_WORDS
                                         or sentence_start(text, match.start())):
            continue
        key = ("month", MONTHS[name.lower()])
        scan.add(_found("month", key, match.start(), match.end(), {key}, {key}, "month"))
    # "Sept.", "Jan": an abbreviation alone is a month only after a word of time ("of Sept.",
    # "in Jan"), since "Jan", "Mar" and "Jun" are names and words too
    for match in scan.anchored(MONTH_ABBREVIATION_ALONE, scan.word_starts(MONTH_ABBREVIATIONS)):
        if _next_is_name(text, match.end()) or _previous_word(text, match.start()).lower() not in TIME_WORDS:
            continue
        key = ("month", MONTH_ABBREVIATIONS[match["month"].lower()])
        scan.add(_found("month", key, match.start(), match.end("month"), {key}, {key}, "month"))
