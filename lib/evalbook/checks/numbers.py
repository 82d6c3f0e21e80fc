"""Numbers, amounts of money, percentages and quantities, in digits or in words, for the fact check.

Number words become digits through text2num (compiled, 1 µs a phrase); the spans are found here by
regular expressions, and so are what text2num leaves out: "a dozen", "and a half", "point five",
a year said in words ("nineteen eighty-nine"), the scale after digits ("4 million", "£4m"),
currencies and units. Every quantity is kept in its dimension's base unit (metres, kilograms,
kelvin...) so that "5 km" and "5,000 metres" are one value; units of another system are also
equal when one rounds to the other as written ("3 miles" and "4.8 km").
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from text_to_num import text2num

from evalbook.checks.found import Found, Scan

UNIT_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
              "sixteen seventeen eighteen nineteen").split()
TENS_WORDS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12}
SCALE_ABBREVIATIONS = {"k": 1000, "m": 10**6, "mn": 10**6, "mln": 10**6, "b": 10**9, "bn": 10**9,
                       "bln": 10**9, "tn": 10**12}
DIGIT_WORDS = {word: index for index, word in enumerate(UNIT_WORDS[:10])} | {"oh": 0}
ORDINAL_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
    "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
    "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50, "sixtieth": 60, "seventieth": 70,
    "eightieth": 80, "ninetieth": 90, "hundredth": 100, "thousandth": 1000, "millionth": 10**6,
}


def alternation(words) -> str:
    """A regular-expression alternation of `words`, longest first so that none stops short."""
    return "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))


NUMBER_WORD = alternation(UNIT_WORDS + TENS_WORDS + list(SCALES) + ["dozen"])
SCALE_WORD = alternation(SCALES)
# digits with thousands separators and decimals; never part of a longer figure (3.2.1, 1,00)
DIGITS = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![.,]?\d)"
# a sign only where no word or figure stands right before it (9-5 is a range, COVID-19 a code)
SIGNED_DIGITS = rf"(?:(?i:\bminus\s+)|(?<![\w.,/)\]])[-\u2212](?=\d))?(?<![\w.,/])(?<![A-Za-z]-){DIGITS}"
# "2.5bn" is always a scale; "1.5m" is left to the metre
DIGIT_AMOUNT = rf"{SIGNED_DIGITS}(?:\s+(?i:{SCALE_WORD})\b|\s?(?:bn|mn|mln|bln|tn)\b)?"
WORD_AMOUNT = (rf"(?i:(?:\bminus\s+)?(?:\b(?:half\s+)?an?\s+(?=(?:{SCALE_WORD}|dozen)\b))?\b(?:{NUMBER_WORD})\b"
               rf"(?:(?:\s+and\s+|\s*-\s*|\s+)(?:{NUMBER_WORD})\b){{0,15}}"  # bounded: see LONGEST_NUMBER
               rf"(?:\s+point(?:\s+(?:{alternation(DIGIT_WORDS)})\b)+)?(?:\s+and\s+a\s+half\b)?)")
HALF_AN = r"(?i:\bhalf\s+an?)"  # "half an hour": only before a unit
AMOUNT = rf"(?:{DIGIT_AMOUNT}|{WORD_AMOUNT}|{HALF_AN})"
NUMBER_LEX = frozenset(UNIT_WORDS + TENS_WORDS + list(SCALES) + ["dozen", "minus", "half"])
AFTER_A = frozenset(list(SCALES) + ["dozen"])
RANGE_TAIL = rf"(?:\s*(?:[-\u2013]|\bto\b)\s*(?P<second>{AMOUNT}))?"


# ---------------------------------------------------------------- reading a figure

def words_value(phrase: str) -> tuple[Decimal, bool] | None:
    """The value of number words and whether they read as a year ("nineteen eighty-nine"); None
    when they are not one number."""
    text = " ".join(phrase.lower().replace("-", " - ").split()).replace(" - ", "-")
    negative = text.startswith("minus ")
    if negative:
        text = text[6:]
    half = text.endswith(" and a half")
    if half:
        text = text[:-len(" and a half")]
    if text in ("half a", "half an"):
        return Decimal("0.5"), False
    halved = text.startswith("half a ")
    if halved:
        text = text[len("half "):]
    if text.startswith("an "):
        text = "one " + text[3:]
    if text.startswith("a "):
        text = "one " + text[2:]
    fraction = ""
    if " point " in text:
        text, _, decimals = text.partition(" point ")
        fraction = "".join(str(DIGIT_WORDS[word]) for word in decimals.split())
    value, year = _cardinal(text)
    if value is None:
        return None
    number = Decimal(f"{value}.{fraction}") if fraction else Decimal(value)
    if half:
        number += Decimal("0.5")
    if halved:
        number /= 2
    return (-number if negative else number), year and not (fraction or half or negative or halved)


def _cardinal(text: str) -> tuple[int | None, bool]:
    if text.endswith("dozen"):
        head = text[:-len("dozen")].strip()
        count = _cardinal(head)[0] if head else 1
        return (None if count is None else count * 12), False
    try:
        return text2num(text, "en"), False
    except ValueError:
        pass
    # a year read in pairs: "nineteen eighty-nine", "twenty twenty"
    head, _, tail = text.partition(" ")
    if head in UNIT_WORDS[10:] + TENS_WORDS and tail and " " not in tail.replace("-", ""):
        try:
            first, second = text2num(head, "en"), text2num(tail, "en")
        except ValueError:
            return None, False
        if 10 <= second <= 99:
            return first * 100 + second, True
    return None, False


def digits_value(text: str) -> Decimal:
    """The value of digits with an optional sign, "minus" and scale word ("-4.5 million")."""
    text = text.strip()
    negative = text[0] in "-\u2212" or text[:5].lower() == "minus"
    figure = re.search(r"[\d,]+(?:\.\d+)?", text).group().replace(",", "")
    value = Decimal(figure)
    scale = re.search(rf"(?i:{SCALE_WORD}|bn|mn|mln|bln|tn)\s*$", text)
    if scale:
        word = scale.group().lower()
        value *= SCALES.get(word) or SCALE_ABBREVIATIONS[word]
    return -value if negative else value


def amount_value(text: str) -> Decimal | None:
    """The value of an AMOUNT match, in digits or in words; None when words are not one number."""
    if any(char.isdigit() for char in text):
        return digits_value(text)
    read = words_value(text)
    return None if read is None else read[0]


def exponent(text: str) -> int:
    """The place of the last digit written: 0 for "5", -1 for "4.8", 0 for words."""
    decimals = re.search(r"\.(\d+)", text)
    return -len(decimals.group(1)) if decimals and any(c.isdigit() for c in text) else 0


def number_keys(value: Decimal) -> frozenset:
    return frozenset({("number", value), ("bare", value)})


def amount_starts(scan: Scan) -> list[int]:
    """Where an amount may start: a figure, a number word, "minus", or "a" before "dozen" or a scale."""
    starts = scan.memo.get("amounts")
    if starts is None:
        words = scan.word_starts(NUMBER_LEX)
        lower = scan.lower
        article = [start - len(article) for start in scan.word_starts(AFTER_A) for article in ("a ", "an ")
                   if lower.endswith(article, 0, start)
                   and (start == len(article) or not lower[start - len(article) - 1].isalpha())]
        starts = scan.memo["amounts"] = sorted(scan.digit_starts() + words + article)
    return starts


def _found(kind, value, start, end, needs, provides, family, extra=None) -> Found:
    return Found(kind, value, start, end, frozenset(needs), frozenset(provides), family, extra)


# ---------------------------------------------------------------- money

CURRENCY_SYMBOLS = {
    "£": "GBP", "€": "EUR", "$": "USD", "US$": "USD", "U.S.$": "USD", "A$": "AUD", "AU$": "AUD",
    "C$": "CAD", "CA$": "CAD", "NZ$": "NZD", "HK$": "HKD", "S$": "SGD", "R$": "BRL", "¥": "JPY",
    "₹": "INR", "Rs": "INR", "Rs.": "INR", "₩": "KRW", "₽": "RUB", "₺": "TRY", "₪": "ILS", "₦": "NGN",
}
CURRENCY_CODES = {code: code for code in (
    "USD GBP EUR JPY INR AUD CAD CNY CHF NZD HKD SGD ZAR SEK NOK DKK BRL MXN KRW RUB TRY ILS NGN").split()}
CURRENCY_CODES["RMB"] = "CNY"
DOLLAR_COUNTRIES = {"us": "USD", "u.s.": "USD", "american": "USD", "australian": "AUD", "canadian": "CAD",
                    "new zealand": "NZD", "hong kong": "HKD", "singapore": "SGD"}
CURRENCY_WORDS = {"dollar": "USD", "pound": "GBP", "sterling": "GBP", "euro": "EUR", "yen": "JPY",
                  "yuan": "CNY", "renminbi": "CNY", "rupee": "INR", "franc": "CHF", "pence": "GBP",
                  "penny": "GBP", "cent": "USD"}
HUNDREDTHS = ("pence", "penny", "cent")
POUND_TO_KG = Decimal("0.45359237")
WEIGHT_WORDS = re.compile(r"(?i:\b(?:weigh\w*|weight|heav\w*|light\w*|mass|lbs?)\b)")

SYMBOL = alternation(k for k in CURRENCY_SYMBOLS if not k.startswith("Rs"))
CODE = alternation(CURRENCY_CODES)
SCALE_AFTER = rf"(?:\s+(?i:{SCALE_WORD})\b|\s?(?:{alternation(SCALE_ABBREVIATIONS)}|K|M|B|BN)\b)"
UNSIGNED = rf"(?<![\w.,/]){DIGITS}"
MONEY_BEFORE = re.compile(
    rf"(?:(?<![\w$£€¥₹])(?P<symbol>{SYMBOL}|\bRs\.?)|\b(?P<iso>{CODE}))\s?(?P<sign>[-\u2212])?"
    rf"(?P<first>{UNSIGNED})(?P<scale1>{SCALE_AFTER})?"
    rf"(?:\s*(?:[-\u2013]|\bto\b)\s*(?:{SYMBOL}|{CODE})?\s?(?P<second>{UNSIGNED})(?P<scale2>{SCALE_AFTER})?)?")
MONEY_AFTER = re.compile(
    rf"(?P<first>{AMOUNT})(?:\s*(?:[-\u2013]|\bto\b)\s*(?P<second>{AMOUNT}))?\s*(?:-\s*)?"
    rf"(?:(?P<word>(?i:(?:(?:{alternation(DOLLAR_COUNTRIES)})\s+)?dollars?|pounds?(?:\s+sterling)?"
    rf"|sterling|euros?|yen|yuan|renminbi|rupees?|francs?|pence|penny|cents?))\b"
    rf"|(?P<iso>{CODE})\b|(?P<symbol>[€£¥₹]))")
PENCE = re.compile(rf"(?<![\w.,/])(?P<first>{DIGITS})p\b")
# "twelve pounds fifty", "5 dollars and 20 cents": the hundredths after the whole amount, when a
# hundredths word or the end of the clause follows them
CENTS_AFTER = re.compile(rf"\s+(?:and\s+)?(?P<cents>{WORD_AMOUNT}|\d{{1,2}}(?!\d))"
                         rf"(?:(?P<unit>\s*(?:p|pence|cents?)\b)|(?=\s*(?:[.,;:!?)]|$|\s+(?:and|or|per|each|a|an)\b)))")


def _scaled(value: Decimal, scale: str | None) -> Decimal:
    if not scale:
        return value
    word = scale.strip().lower()
    return value * (SCALES.get(word) or SCALE_ABBREVIATIONS[word])


def money(code: str, value: Decimal, start: int, end: int, also_mass: bool = False) -> Found:
    needs = {(code, value), ("bare", value)}
    provides = {(code, value), ("number", value)}
    if also_mass:  # "14 pounds" with no word of weight near: money, but a weight holds it too
        mass = ("mass", _base(value * POUND_TO_KG))
        needs.add(mass)
        provides.add(mass)
    return _found("money", (code, value), start, end, needs, provides, "money")


def scan_money(scan: Scan) -> None:
    text = scan.text
    symbols = any(symbol in text for symbol in "£€$¥₹₩₽₺₪₦") or "Rs" in text or any(
        code in text for code in CURRENCY_CODES)
    for match in (scan.free_matches(MONEY_BEFORE) if symbols else ()):
        code = (CURRENCY_SYMBOLS[match["symbol"]] if match["symbol"] else CURRENCY_CODES[match["iso"]])
        sign = -1 if match["sign"] else 1
        scale2 = match["scale2"]
        first = sign * _scaled(digits_value(match["first"]), match["scale1"] or scale2)
        end_first = match.end("scale1") if match["scale1"] else match.end("first")
        scan.add(money(code, first, match.start(), end_first))
        if match["second"]:
            second = _scaled(digits_value(match["second"]), scale2)
            scan.add(money(code, second, match.start("second") - _symbol_before(text, match.start("second")),
                           match.end()))
    for match in scan.anchored(MONEY_AFTER, amount_starts(scan)):
        word = (match["word"] or "").lower()
        if word:
            kind = next(key for key in CURRENCY_WORDS if key in word)
            code = next((c for country, c in DOLLAR_COUNTRIES.items() if word.startswith(country + " ")),
                        CURRENCY_WORDS[kind]) if kind == "dollar" else CURRENCY_WORDS[kind]
        else:
            code = CURRENCY_CODES.get(match["iso"]) or CURRENCY_SYMBOLS[match["symbol"]]
        values = [amount_value(match["first"])] + ([amount_value(match["second"])] if match["second"] else [])
        if None in values:
            continue
        if word and kind in HUNDREDTHS:
            values = [value / 100 for value in values]
        pounds = word.startswith("pound") and "sterling" not in word
        if pounds and WEIGHT_WORDS.search(text, max(0, match.start() - 40), match.start()):
            continue  # "weighs 14 pounds": a weight, which the quantities take
        if match["second"]:
            scan.add(money(code, values[0], match.start(), match.end("first"), pounds))
            scan.add(money(code, values[1], match.start("second"), match.end(), pounds))
            continue
        end, value = match.end(), values[0]
        cents = CENTS_AFTER.match(text, end) if word and kind not in HUNDREDTHS and value == int(value) else None
        if cents and (cents_value := amount_value(cents["cents"])) is not None and 0 < cents_value < 100 \
                and cents_value == int(cents_value):
            end, value = cents.end("cents") if not cents["unit"] else cents.end(), value + cents_value / 100
        scan.add(money(code, value, match.start(), end, pounds))
    for match in scan.anchored(PENCE, scan.digit_starts()):
        scan.add(money("GBP", digits_value(match["first"]) / 100, match.start(), match.end()))


def _symbol_before(text: str, position: int) -> int:
    """How many characters of a currency symbol stand right before `position` (the "£" of "£15"
    in "£10-£15")."""
    for symbol in sorted(CURRENCY_SYMBOLS, key=len, reverse=True):
        if text.endswith(symbol, 0, position):
            return len(symbol)
    return 0


# ---------------------------------------------------------------- percent

PERCENT = re.compile(
    rf"(?P<first>{AMOUNT}){RANGE_TAIL}\s*"
    rf"(?:%|(?i:per\s?cent(?:age\s+points?)?|percent(?:age\s+points?)?|pct)\b)")


def percent(value: Decimal, start: int, end: int) -> Found:
    return _found("percent", ("percent", value), start, end, {("percent", value), ("bare", value)},
                  {("percent", value), ("number", value)}, "percent")


def scan_percent(scan: Scan) -> None:
    for match in scan.anchored(PERCENT, amount_starts(scan)):
        first = amount_value(match["first"])
        second = amount_value(match["second"]) if match["second"] else None
        if first is None or (match["second"] and second is None):
            continue
        if match["second"]:
            scan.add(percent(first, match.start(), match.end("first")))
            scan.add(percent(second, match.start("second"), match.end()))
        else:
            scan.add(percent(first, match.start(), match.end()))


# ---------------------------------------------------------------- quantities

def _unit(dimension: str, factor, before: str = "0", after: str = "0") -> tuple:
    """A unit as (dimension, before, factor, after): base = (value + before) * factor + after."""
    return dimension, Decimal(before), Decimal(factor), Decimal(after)


FAHRENHEIT = _unit("temperature", Decimal(5) / Decimal(9), "-32", "273.15")
CELSIUS = _unit("temperature", 1, "0", "273.15")
# symbols: matched with their case ("m" is a metre, "M" is not)
SYMBOL_UNITS = {
    "mm": _unit("length", "0.001"), "cm": _unit("length", "0.01"), "m": _unit("length", 1),
    "km": _unit("length", 1000), "ft": _unit("length", "0.3048"), "yd": _unit("length", "0.9144"),
    "mi": _unit("length", "1609.344"),
    "mg": _unit("mass", "0.000001"), "g": _unit("mass", "0.001"), "kg": _unit("mass", 1),
    "lb": _unit("mass", POUND_TO_KG), "lbs": _unit("mass", POUND_TO_KG), "oz": _unit("mass", "0.028349523125"),
    "ml": _unit("volume", "0.001"), "mL": _unit("volume", "0.001"), "cl": _unit("volume", "0.01"),
    "l": _unit("volume", 1), "L": _unit("volume", 1),
    "m²": _unit("area", 1), "km²": _unit("area", 1_000_000), "ha": _unit("area", 10_000),
    "sq ft": _unit("area", "0.09290304"), "sq m": _unit("area", 1), "sq km": _unit("area", 1_000_000),
    "sq mi": _unit("area", "2589988.110336"), "m³": _unit("volume", 1000),
    "km/h": _unit("speed", Decimal(1000) / Decimal(3600)), "kph": _unit("speed", Decimal(1000) / Decimal(3600)),
    "mph": _unit("speed", "0.44704"), "m/s": _unit("speed", 1),
    "°C": CELSIUS, "° C": CELSIUS, "ºC": CELSIUS, "º C": CELSIUS, "°F": FAHRENHEIT, "° F": FAHRENHEIT,
    "ºF": FAHRENHEIT, "º F": FAHRENHEIT, "°": _unit("degree", 1), "º": _unit("degree", 1),
    "ms": _unit("duration", "0.001"), "sec": _unit("duration", 1), "secs": _unit("duration", 1),
    "min": _unit("duration", 60), "mins": _unit("duration", 60), "hr": _unit("duration", 3600),
    "hrs": _unit("duration", 3600),
    "W": _unit("power", 1), "kW": _unit("power", 1000), "MW": _unit("power", 10**6), "GW": _unit("power", 10**9),
    "Wh": _unit("energy", 3600), "kWh": _unit("energy", 3_600_000), "MWh": _unit("energy", 3_600_000_000),
    "GWh": _unit("energy", 3_600_000_000_000), "J": _unit("energy", 1), "kJ": _unit("energy", 1000),
    "kcal": _unit("energy", 4184), "cal": _unit("energy", "4.184"),
    "kB": _unit("data", 1000), "KB": _unit("data", 1000), "MB": _unit("data", 10**6),
    "GB": _unit("data", 10**9), "TB": _unit("data", 10**12),
    "Hz": _unit("frequency", 1), "kHz": _unit("frequency", 1000), "MHz": _unit("frequency", 10**6),
    "GHz": _unit("frequency", 10**9), "V": _unit("voltage", 1), "kV": _unit("voltage", 1000),
}


def _spellings(words: str, unit: tuple) -> dict:
    return {word: unit for word in words.split("|")}


# words: matched in any case, plurals included
WORD_UNITS = (
    _spellings("millimetre|millimetres|millimeter|millimeters", SYMBOL_UNITS["mm"])
    | _spellings("centimetre|centimetres|centimeter|centimeters", SYMBOL_UNITS["cm"])
    | _spellings("metre|metres|meter|meters", SYMBOL_UNITS["m"])
    | _spellings("kilometre|kilometres|kilometer|kilometers", SYMBOL_UNITS["km"])
    | _spellings("inch|inches", _unit("length", "0.0254"))
    | _spellings("foot|feet", SYMBOL_UNITS["ft"]) | _spellings("yard|yards", SYMBOL_UNITS["yd"])
    | _spellings("mile|miles", SYMBOL_UNITS["mi"]) | _spellings("nautical mile|nautical miles", _unit("length", 1852))
    | _spellings("milligram|milligrams|milligramme|milligrammes", SYMBOL_UNITS["mg"])
    | _spellings("gram|grams|gramme|grammes", SYMBOL_UNITS["g"])
    | _spellings("kilogram|kilograms|kilogramme|kilogrammes|kilo|kilos", SYMBOL_UNITS["kg"])
    | _spellings("tonne|tonnes|ton|tons|metric ton|metric tons", _unit("mass", 1000))
    | _spellings("pound|pounds", SYMBOL_UNITS["lb"]) | _spellings("ounce|ounces", SYMBOL_UNITS["oz"])
    | _spellings("stone", _unit("mass", "6.35029318"))
    | _spellings("millilitre|millilitres|milliliter|milliliters", SYMBOL_UNITS["ml"])
    | _spellings("litre|litres|liter|liters", SYMBOL_UNITS["l"])
    | _spellings("gallon|gallons", _unit("volume", "3.785411784"))
    | _spellings("cubic metre|cubic metres|cubic meter|cubic meters", SYMBOL_UNITS["m³"])
    | _spellings("square metre|square metres|square meter|square meters", SYMBOL_UNITS["m²"])
    | _spellings("square kilometre|square kilometres|square kilometer|square kilometers", SYMBOL_UNITS["km²"])
    | _spellings("square mile|square miles", SYMBOL_UNITS["sq mi"])
    | _spellings("square foot|square feet", SYMBOL_UNITS["sq ft"])
    | _spellings("hectare|hectares", SYMBOL_UNITS["ha"]) | _spellings("acre|acres", _unit("area", "4046.8564224"))
    | _spellings("kilometres per hour|kilometers per hour", SYMBOL_UNITS["km/h"])
    | _spellings("miles per hour", SYMBOL_UNITS["mph"])
    | _spellings("metres per second|meters per second", SYMBOL_UNITS["m/s"])
    | _spellings("knot|knots", _unit("speed", Decimal(1852) / Decimal(3600)))
    | _spellings("degree celsius|degrees celsius|degree centigrade|degrees centigrade|degrees c|degree c", CELSIUS)
    | _spellings("degree fahrenheit|degrees fahrenheit|degrees f|degree f", FAHRENHEIT)
    | _spellings("kelvin", _unit("temperature", 1)) | _spellings("degree|degrees", SYMBOL_UNITS["°"])
    | _spellings("millisecond|milliseconds", SYMBOL_UNITS["ms"])
    | _spellings("second|seconds", SYMBOL_UNITS["sec"]) | _spellings("minute|minutes", SYMBOL_UNITS["min"])
    | _spellings("hour|hours", SYMBOL_UNITS["hr"]) | _spellings("day|days", _unit("duration", 86400))
    | _spellings("week|weeks", _unit("duration", 604800))
    | _spellings("month|months", _unit("calendar", 1)) | _spellings("year|years|yr|yrs", _unit("calendar", 12))
    | _spellings("decade|decades", _unit("calendar", 120)) | _spellings("century|centuries", _unit("calendar", 1200))
    | _spellings("watt|watts", SYMBOL_UNITS["W"]) | _spellings("kilowatt|kilowatts", SYMBOL_UNITS["kW"])
    | _spellings("megawatt|megawatts", SYMBOL_UNITS["MW"]) | _spellings("gigawatt|gigawatts", SYMBOL_UNITS["GW"])
    | _spellings("kilowatt hour|kilowatt hours|kilowatt-hour|kilowatt-hours", SYMBOL_UNITS["kWh"])
    | _spellings("joule|joules", SYMBOL_UNITS["J"]) | _spellings("calorie|calories", SYMBOL_UNITS["cal"])
    | _spellings("kilocalorie|kilocalories", SYMBOL_UNITS["kcal"])
    | _spellings("byte|bytes", _unit("data", 1)) | _spellings("kilobyte|kilobytes", SYMBOL_UNITS["kB"])
    | _spellings("megabyte|megabytes", SYMBOL_UNITS["MB"]) | _spellings("gigabyte|gigabytes", SYMBOL_UNITS["GB"])
    | _spellings("terabyte|terabytes", SYMBOL_UNITS["TB"])
    | _spellings("hertz", SYMBOL_UNITS["Hz"]) | _spellings("volt|volts", SYMBOL_UNITS["V"])
)
FAMILIES = {"degree": "quantity:temperature"}  # "100 degrees" may be a temperature


# the lone word "one" is a number only after one of these; elsewhere it is a pronoun or an
# article ("the one Sunday sailing", "one of the", "one can see")
ONE_COUNTERS = {"only", "just", "exactly", "than", "about", "nearly", "almost", "least", "most", "over",
                "under", "around", "approximately", "roughly", "precisely", "merely"}
# "one day" or "one year" tells a story unless one of these counts it ("for one year")
ONE_SPAN_COUNTERS = ONE_COUNTERS | {"for", "in", "within", "after", "every", "per", "of", "lasted", "takes", "took"}


def _word_pattern(word: str) -> str:
    return r"\s+".join(re.escape(part) for part in word.split())


QUANTITY = re.compile(
    rf"(?P<first>{AMOUNT}){RANGE_TAIL}(?:\s*|\s*-\s*)"
    rf"(?P<unit>(?i:{'|'.join(_word_pattern(w) for w in sorted(WORD_UNITS, key=len, reverse=True))})"
    rf"|{alternation(SYMBOL_UNITS)})(?![\w°/²³])")
BASE_EXPONENT = Decimal("1e-9")


def _base(value: Decimal) -> Decimal:
    """A base-unit value rounded past the noise of unit factors (1000/3600)."""
    try:
        return value.quantize(BASE_EXPONENT).normalize()
    except InvalidOperation:
        return value


def to_base(value: Decimal, unit: tuple) -> Decimal:
    _, before, factor, after = unit
    return _base((value + before) * factor + after)


def from_base(value: Decimal, unit: tuple) -> Decimal:
    _, before, factor, after = unit
    return (value - after) / factor - before


def quantity(value: Decimal, unit: tuple, written_exponent: int, start: int, end: int) -> Found:
    dimension = unit[0]
    base = to_base(value, unit)
    needs = {(dimension, base), ("bare", value)}
    provides = {(dimension, base), ("number", value)}
    # "100 °C" and "100 degrees" hold each other; "100 °C" and "100 °F" do not: a scale's
    # temperature needs a bare degree and provides a scaled one, a bare degree the other way round
    if dimension == "temperature":
        needs.add(("degree", value))
        provides.add(("scaled degree", value))
    elif dimension == "degree":
        needs.add(("scaled degree", value))
    return _found("quantity", (dimension, base), start, end, needs, provides,
                  FAMILIES.get(dimension, "quantity:" + dimension), (unit, value, written_exponent))


def unit_of(text: str) -> tuple:
    return SYMBOL_UNITS.get(text) or WORD_UNITS[" ".join(text.lower().split())]


def scan_quantities(scan: Scan) -> None:
    for match in scan.anchored(QUANTITY, amount_starts(scan)):
        unit = unit_of(match["unit"])
        if (match["first"].lower() == "one" and unit[0] in ("duration", "calendar")
                and _last_word(scan.text[max(0, match.start() - 16):match.start()]) not in ONE_SPAN_COUNTERS):
            continue
        first = amount_value(match["first"])
        second = amount_value(match["second"]) if match["second"] else None
        if first is None or (match["second"] and second is None):
            continue
        if match["second"]:
            scan.add(quantity(first, unit, exponent(match["first"]), match.start(), match.end("first")))
            scan.add(quantity(second, unit, exponent(match["second"]), match.start("second"), match.end()))
        else:
            scan.add(quantity(first, unit, exponent(match["first"]), match.start(), match.end()))


def same_quantity(one: Found, other: Found) -> bool:
    """Whether two quantities of one dimension in different units are equal as written: either,
    converted to the other's unit and rounded to its last written digit, is the other ("3 miles"
    and "4.8 km"). In the same unit, only equal values are."""
    (unit, value, places), (other_unit, other_value, other_places) = one.extra, other.extra
    if unit[0] != other_unit[0] or unit[1:] == other_unit[1:]:
        return False
    try:
        return (_rounded(from_base(to_base(value, unit), other_unit), other_places) == other_value
                or _rounded(from_base(to_base(other_value, other_unit), unit), places) == value)
    except InvalidOperation:  # more digits than a Decimal keeps: no conversion makes it the other
        return False


def _rounded(value: Decimal, places: int) -> Decimal:
    return value.quantize(Decimal(1).scaleb(places), rounding=ROUND_HALF_UP)


# ---------------------------------------------------------------- ordinals and plain numbers

ORDINAL_DIGITS = re.compile(r"(?<![\w.,/])(?P<n>\d+)(?:st|nd|rd|th)\b")
ORDINAL_WORDS_RE = re.compile(
    rf"(?i:\b(?:(?P<tens>{alternation(TENS_WORDS)})[-\s])?(?P<word>{alternation(ORDINAL_WORDS)})\b)")
# "first" and "second" count only after one of these: elsewhere they order an argument ("First, ...",
# "at first") or measure time ("a second")
ORDINAL_LEX = frozenset(list(ORDINAL_WORDS) + TENS_WORDS)
ORDINAL_OWNERS = {"the", "its", "his", "her", "their", "our", "your", "my", "whose", "came", "come", "comes",
                  "finished", "finish", "finishes", "placed", "place", "ranked", "rank", "ranks"}
FRACTION_BEFORE = re.compile(rf"(?i:\b(?:a|an|{alternation(UNIT_WORDS)})\s+$)")


def ordinal(value: int, start: int, end: int) -> Found:
    key = ("ordinal", value)
    return _found("ordinal", key, start, end, {key}, {key}, "ordinal")


def scan_ordinals(scan: Scan) -> None:
    text = scan.text
    for match in scan.anchored(ORDINAL_DIGITS, scan.digit_starts()):
        scan.add(ordinal(int(match["n"]), match.start(), match.end()))
    for match in scan.anchored(ORDINAL_WORDS_RE, scan.word_starts(ORDINAL_LEX)):
        word = match["word"].lower()
        value = ORDINAL_WORDS[word] + (text2num(match["tens"].lower(), "en") if match["tens"] else 0)
        before = text[max(0, match.start() - 12):match.start()]
        if not match["tens"]:
            if FRACTION_BEFORE.search(before):
                continue  # "a third of", "two thirds": a fraction
            if word in ("first", "second") and _last_word(before) not in ORDINAL_OWNERS:
                continue
        scan.add(ordinal(value, match.start(), match.end()))


def _last_word(text: str) -> str:
    words = re.findall(r"[^\W\d_]+", text)
    return words[-1].lower() if words else ""


NUMBER_DIGITS = re.compile(rf"{DIGIT_AMOUNT}(?![^\W\d_]|/\d)")  # 3/4 is a fraction, 2019/20 a season
NUMBER_WORDS_RE = re.compile(WORD_AMOUNT)
WORD_TOKEN = re.compile(rf"(?i:\b(?:{NUMBER_WORD}|and|a|minus|point|half|{alternation(DIGIT_WORDS)})\b)")
YEAR_RANGE = range(1000, 2200)
FRACTION_AFTER = re.compile(r"(?i:[ -](?:halves|thirds|quarters|fifths|sixths|sevenths|eighths|ninths|tenths)\b)")
# "1000 people" counts; "1989 the wall fell" and "in 1989." name a year
NEXT_WORD = re.compile(r"[ \t]+([a-z]+)")
AFTER_A_YEAR = set("""the a an and or but when while to with in on at by for of as was were is are saw had has
he she it they we i you his her its their our this that these those which who where after before until till
there from through during onwards onward ad bc bce ce""".split())


def plain_number(value: Decimal, start: int, end: int, year: bool) -> Found:
    if year:
        key = ("year", int(value))
        return _found("year", key, start, end, {key, ("number", value)},
                      {key, ("number", value), ("decade", int(value) // 10 * 10)}, "year")
    return _found("number", ("number", value), start, end, {("number", value)}, number_keys(value), "number")


def scan_numbers(scan: Scan) -> None:
    text = scan.text
    for match in scan.anchored(NUMBER_DIGITS, scan.digit_starts()):
        written = match.group()
        value = digits_value(written)
        year = written.isdigit() and len(written) == 4 and int(written) in YEAR_RANGE
        if year:
            following = NEXT_WORD.match(text, match.end())
            year = not following or following.group(1) in AFTER_A_YEAR
        scan.add(plain_number(value, match.start(), match.end(), year))
    for match in scan.anchored(NUMBER_WORDS_RE, amount_starts(scan)):
        scan.take(match.start(), match.end())  # a run read once, even when it gives no number
        for start, end, value, year in _word_numbers(text, match.start(), match.end()):
            if text[start:end].lower() == "one" and _last_word(text[max(0, start - 16):start]) not in ONE_COUNTERS:
                continue
            if FRACTION_AFTER.match(text, end):
                continue  # "two thirds": a fraction, which the check does not read
            scan.add(plain_number(value, start, end, year))


LONGEST_NUMBER = 16  # words; "seven hundred and seventy-seven thousand seven hundred and seventy-seven" is 12


def _word_numbers(text: str, start: int, end: int):
    """The numbers in a run of number words: the whole run when it is one number, else its longest
    readable pieces from the left ("one or two" never gets here; "twenty twenty" is a year)."""
    tokens = [(m.start(), m.end()) for m in WORD_TOKEN.finditer(text, start, end)]
    read = words_value(text[start:end]) if len(tokens) <= LONGEST_NUMBER else None
    if read is not None:
        yield start, end, read[0], read[1] and int(read[0]) in YEAR_RANGE
        return
    index = 0
    while index < len(tokens):
        for stop in range(min(len(tokens), index + LONGEST_NUMBER), index, -1):
            piece = text[tokens[index][0]:tokens[stop - 1][1]]
            if piece.lower().split()[-1] in ("and", "a", "minus", "point"):
                continue
            read = words_value(piece)
            if read is not None:
                yield tokens[index][0], tokens[stop - 1][1], read[0], False
                index = stop
                break
        else:
            index += 1
