"""The fact check's normalisation tables (evalbook.checks.facts.extract_facts): every way of writing
a number, an amount, a percentage, a quantity, a time, a date, a weekday, a month or a name that
must come out as one value, and the words that are facts only sometimes."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from evalbook.checks.facts import Fact, check_facts, extract_facts


def facts(text: str, kind: str | None = None) -> list[Fact]:
    return [fact for fact in extract_facts(text) if kind is None or fact.kind == kind]


def only(text: str) -> Fact:
    """The one fact of `text`; fails naming every fact found otherwise."""
    found = extract_facts(text)
    assert len(found) == 1, f"{text!r} gave {[(f.kind, f.text) for f in found]}"
    return found[0]


def same_value(*texts: str) -> tuple:
    """The one (kind, value) that every text gives."""
    pairs = {(only(text).kind, only(text).value) for text in texts}
    assert len(pairs) == 1, pairs
    return pairs.pop()


# ---------------------------------------------------------------- numbers

@pytest.mark.parametrize("texts, value", [
    (["It has 14 rooms.", "It has fourteen rooms."], 14),
    (["It takes a dozen eggs.", "It takes 12 eggs."], 12),
    (["Two dozen eggs.", "It needs 24 eggs."], 24),
    (["About 1,000 people came.", "About 1000 people came.", "About one thousand people came.",
      "About a thousand people came."], 1000),
    (["twenty-one pages", "21 pages", "twenty one pages"], 21),
    (["one hundred and twenty-three pages", "123 pages"], 123),
    (["3.5 pages", "three point five pages"], Decimal("3.5")),
    (["two and a half pages", "2.5 pages"], Decimal("2.5")),
    (["4 million people", "four million people", "4,000,000 people"], 4_000_000),
    (["2.5 billion people", "2,500,000,000 people"], 2_500_000_000),
    (["It fell to -5 overnight.", "It fell to minus five overnight.", "It fell to \u22125 overnight."], -5),
    (["zero errors", "0 errors"], 0),
])
def test_numbers_in_digits_and_in_words_are_one_value(texts, value):
    assert same_value(*texts) == ("number", ("number", value))


def test_the_value_is_a_decimal_so_that_one_thousand_and_1000_point_0_are_equal():
    assert only("1000.0 people").value == only("1,000 people").value
    assert isinstance(only("1,000 people").value[1], Decimal)


@pytest.mark.parametrize("text", ["3rd place", "third place"])
def test_ordinals_in_digits_and_words(text):
    assert only(text).kind == "ordinal" and only(text).value == ("ordinal", 3)


def test_compound_ordinals():
    assert same_value("the 21st century", "the twenty-first century") == ("ordinal", ("ordinal", 21))


def test_first_and_second_are_ordinals_after_the_but_not_as_discourse():
    assert only("She was the first woman to fly it.").value == ("ordinal", 1)
    assert facts("First, preheat the oven.") == []
    assert facts("At first it was hard, but wait a second.") == []


def test_one_is_a_number_only_when_it_counts():
    assert facts("The one Sunday sailing leaves early.", "number") == []
    assert facts("It is one of the oldest bridges.", "number") == []
    assert facts("One can see the bridge from here.", "number") == []
    assert [f.value for f in facts("There is only one sailing.")] == [("number", 1)]
    assert [f.value for f in facts("It has one hundred rooms.")] == [("number", 100)]


def test_a_range_gives_both_ends():
    assert [f.value for f in facts("Open 9-5 on weekdays.", "number")] == [("number", 9), ("number", 5)]


def test_codes_glued_to_letters_are_not_numbers():
    assert facts("COVID-19 and 5G and MP3", "number") == []


def test_numbers_inside_a_web_address_are_not_facts():
    assert facts("See https://example.org/2019/05/page-12 for more.") == []


# ---------------------------------------------------------------- money

@pytest.mark.parametrize("texts, value", [
    (["£14", "14 pounds", "GBP 14", "14 GBP", "fourteen pounds", "£14.00"], ("GBP", 14)),
    (["$1,000", "1,000 dollars", "USD 1000", "US$1,000", "one thousand dollars"], ("USD", 1000)),
    (["€5", "5 euros", "EUR 5", "5 €"], ("EUR", 5)),
    (["£4m", "£4 million", "£4,000,000", "four million pounds"], ("GBP", 4_000_000)),
    (["$2.5bn", "$2.5 billion"], ("USD", 2_500_000_000)),
    (["50p", "£0.50", "50 pence"], ("GBP", Decimal("0.5"))),
    (["¥100", "100 yen"], ("JPY", 100)),
    (["₹500", "Rs 500", "Rs. 500", "500 rupees"], ("INR", 500)),
    (["A$20", "20 Australian dollars", "AUD 20"], ("AUD", 20)),
])
def test_amounts_with_their_currency(texts, value):
    for text in texts:
        fact = only(f"It costs {text} now.")
        assert (fact.kind, fact.value) == ("money", value), text


def test_an_amount_keeps_its_text_as_written():
    assert only("It costs £14 now.").text == "£14"
    assert only("It costs 14 pounds now.").text == "14 pounds"


def test_a_money_range_gives_both_ends_in_its_currency():
    assert [f.value for f in facts("Tickets are £10-15.")] == [("GBP", 10), ("GBP", 15)]


# ---------------------------------------------------------------- percent

@pytest.mark.parametrize("text", ["25%", "25 %", "25 per cent", "25 percent", "twenty-five per cent"])
def test_percentages(text):
    fact = only(f"Prices rose {text}.")
    assert (fact.kind, fact.value) == ("percent", ("percent", 25))


def test_a_percentage_range_gives_both_ends():
    assert [f.value for f in facts("It rose 10-15%.")] == [("percent", 10), ("percent", 15)]


# ---------------------------------------------------------------- quantities

@pytest.mark.parametrize("texts", [
    ["100 °C", "100°C", "100 degrees Celsius", "212 °F", "212 degrees Fahrenheit", "100 ºC"],
    ["5 km", "5,000 metres", "5000 m", "five kilometres", "5 kilometers"],
    ["10 kg", "10,000 grams", "ten kilograms"],
    ["2 years", "24 months", "two years"],
    ["3 hours", "180 minutes", "three hours"],
    ["1.5 litres", "1,500 ml"],
    ["2 GB", "2,000 MB"],
    ["50 mph", "50 miles per hour"],
])
def test_quantities_in_one_dimension_and_unit_are_one_value(texts):
    kind, value = same_value(*texts)
    assert kind == "quantity"


def test_quantities_of_other_dimensions_differ():
    assert only("5 km").value != only("5 kg").value
    assert only("5 km").value != only("5 miles").value


def test_a_negative_temperature():
    assert same_value("-5 °C", "minus five degrees Celsius")[0] == "quantity"


# ---------------------------------------------------------------- times

@pytest.mark.parametrize("text", ["9 p.m.", "9pm", "9 PM", "21:00", "9:00 pm", "nine p.m.", "9.00pm"])
def test_evening_times(text):
    assert only(f"It opens at {text} daily.").value == ("time", 21, 0)


@pytest.mark.parametrize("text, value", [
    ("noon", ("time", 12, 0)), ("midday", ("time", 12, 0)), ("12 noon", ("time", 12, 0)),
    ("12pm", ("time", 12, 0)), ("midnight", ("time", 0, 0)), ("12 a.m.", ("time", 0, 0)),
    ("09:30", ("time", 9, 30)), ("9.30am", ("time", 9, 30)), ("13:05", ("time", 13, 5)),
])
def test_times_that_say_which_half_of_the_day(text, value):
    assert only(f"It opens at {text} daily.").value == value


@pytest.mark.parametrize("text, value", [
    ("9:30", ("time12", 9, 30)), ("half past nine", ("time12", 9, 30)),
    ("nine o'clock", ("time12", 9, 0)), ("9 o'clock", ("time12", 9, 0)),
    ("quarter past ten", ("time12", 10, 15)), ("a quarter to ten", ("time12", 9, 45)),
])
def test_times_that_leave_the_half_of_the_day_open(text, value):
    assert only(f"It opens at {text} daily.").value == value


def test_a_time_range():
    assert [f.value for f in facts("Open 9am-5pm.")] == [("time", 9, 0), ("time", 17, 0)]


# ---------------------------------------------------------------- dates

@pytest.mark.parametrize("text", [
    "9 November 1989", "November 9, 1989", "1989-11-09", "9th November 1989", "the 9th of November, 1989",
    "Nov. 9, 1989", "9 Nov 1989", "November 9th, 1989", "9 november 1989",
])
def test_one_date_in_many_forms(text):
    fact = only(f"The wall fell on {text}.")
    assert (fact.kind, fact.value) == ("date", ("date", 1989, 11, 9))


def test_partial_dates():
    assert only("It opened in November 1989.").value == ("date", 1989, 11, None)
    assert only("It opens on 9 November.").value == ("date", None, 11, 9)
    assert only("It opens on November 9.").value == ("date", None, 11, 9)


def test_a_numeric_date_that_could_be_either_way_round_is_kept_as_written_day_first():
    fact = only("It opened on 03/04/2020.")
    assert fact.kind == "date" and fact.value == ("date", 2020, 4, 3)
    assert only("It opened on 12/31/2020.").value == ("date", 2020, 12, 31)


def test_years_decades_and_eras():
    assert only("It opened in 1989.").value == ("year", 1989)
    assert only("It was built in the 1990s.").value == ("decade", 1990)
    assert only("It was built in 500 BC.").value == ("year", -500)
    assert only("About 1,989 people came.").kind == "number"


def test_a_year_spoken_in_words():
    assert only("It opened in nineteen eighty-nine.").value == ("year", 1989)


# ---------------------------------------------------------------- weekdays and months

@pytest.mark.parametrize("text, value", [
    ("on Thursday", 3), ("on thursday", 3), ("on Mondays", 0), ("every Sunday", 6),
])
def test_weekdays_singular_and_plural(text, value):
    fact = only(f"It closes {text}.")
    assert (fact.kind, fact.value) == ("weekday", ("weekday", value))


def test_a_plural_weekday_keeps_its_text():
    assert only("It closes on Sundays.").text == "Sundays"


def test_weekdays_inside_a_name_are_the_name():
    assert [f.kind for f in facts("She writes for the Sunday Times.")] == ["name"]
    assert [f.kind for f in facts("It was sold on Black Friday.")] == ["name"]


@pytest.mark.parametrize("text, month", [
    ("It opens in March.", 3), ("It opens in May.", 5), ("It ran from April to August.", 4),
    ("It opens in early June.", 6), ("It closes in mid-May.", 5), ("It opens in September.", 9),
])
def test_a_month_alone(text, month):
    assert facts(text, "month")[0].value == ("month", month)


@pytest.mark.parametrize("text", [
    "You may open it.", "May I ask a question?", "They march to the hall.", "March forward, they said.",
    "It was an august body.", "It may be that the doors open.",
])
def test_may_march_and_august_as_words_are_not_months(text):
    assert facts(text, "month") == [] and facts(text, "date") == []


def test_may_with_a_day_is_a_date():
    assert only("It opens on May 5.").value == ("date", None, 5, 5)
    assert only("It opened on 5 May 2020.").value == ("date", 2020, 5, 5)


# ---------------------------------------------------------------- names

def test_names_are_capitalised_spans_set_apart_from_case_and_punctuation():
    assert [f.value for f in facts("It was built by Gustave Eiffel.")] == [("name", "gustave eiffel")]
    assert [f.value for f in facts("He asked Dr. Smith.")] == [("name", "dr smith")]
    assert [f.value for f in facts("It is in the U.S. now.")] == [("name", "us")]
    assert [f.value for f in facts("They met at O'Brien's.")] == [("name", "obrien")]


def test_the_first_word_of_a_sentence_alone_is_not_a_name():
    assert facts("Spiders have eight legs.", "name") == []
    assert facts("However, it rained. Bridges closed.", "name") == []


def test_a_first_word_that_starts_a_longer_name_is_kept():
    assert [f.text for f in facts("New York is large.", "name")] == ["New York"]


def test_a_first_word_is_a_name_when_the_text_uses_it_as_one_elsewhere():
    assert [f.text for f in facts("Paris is large. Many visit Paris.", "name")] == ["Paris", "Paris"]


def test_function_words_leading_a_span_are_dropped():
    assert [f.text for f in facts("In Paris, it rained.", "name")] == ["Paris"]
    assert [f.text for f in facts("The Beatles played.", "name")] == ["Beatles"]


def test_a_word_shouted_after_a_shouted_article_at_a_sentence_start_is_no_name():
    # a news lede in capitals ("THE GROWTH of ...") is style, not an acronym
    assert facts("THE GROWTH of the two parks has been slow.", "name") == []
    assert [f.text for f in facts("The NASA probe flew. NASA launched it.", "name")] == ["NASA", "NASA"]
    assert [f.text for f in facts("LEEDS — Two parks opened.", "name")] == ["LEEDS"]


def test_the_pronoun_i_is_not_a_name():
    assert facts("I think so, and so do I.", "name") == []


def test_a_title_abbreviation_does_not_end_the_sentence():
    assert [f.text for f in facts("They asked Mr. Brown.", "name")] == ["Mr. Brown"]


def test_each_fact_carries_its_span():
    text = "It costs £14 on Thursday."
    for fact in extract_facts(text):
        assert text[fact.start:fact.end] == fact.text


def test_a_day_in_ordinal_words():
    assert same_value("It opens on the first of May.", "It opens on May 1st.", "It opens on 1 May.") == (
        "date", ("date", None, 5, 1))
    assert only("It opened on the twenty-first of June 2020.").value == ("date", 2020, 6, 21)


def test_halves_of_a_scale_and_of_a_unit():
    assert only("It drew half a million people.").value == ("number", 500_000)
    assert same_value("It takes half an hour.", "It takes 30 minutes.")[0] == "quantity"


def test_times_of_the_day_in_words_and_with_a_dot():
    assert only("It opens at 9 in the evening.").value == ("time", 21, 0)
    assert only("It opens at nine in the morning.").value == ("time", 9, 0)
    assert only("It opens at 21.00 daily.").value == ("time", 21, 0)
    assert only("It costs 21.00 a day.").kind == "number"


def test_an_iso_date_with_its_time():
    assert [f.value for f in facts("It ran at 1989-11-09T21:00.")] == [("date", 1989, 11, 9), ("time", 21, 0)]


def test_a_place_in_a_race_after_a_verb_of_ranking():
    assert only("She finished first.").value == ("ordinal", 1)


def test_a_scale_abbreviation_after_digits():
    assert same_value("It serves 2.5bn people.", "It serves 2.5 billion people.") == (
        "number", ("number", 2_500_000_000))


def test_fractions_are_not_read_as_numbers_or_ordinals():
    assert facts("Two thirds of them and a third of us came.") == []


def test_a_long_run_of_number_words_is_read_in_linear_time():
    # each run was once read again from each of its words: 1,000 "one"s took 31 s
    started = time.perf_counter()
    assert facts(" ".join(["one"] * 2000)) == []
    facts(" ".join(["twenty"] * 2000))
    assert time.perf_counter() - started < 5


def test_a_figure_too_long_for_a_decimal_is_compared_without_error():
    long = "9" * 60  # converting it to miles and rounding raised decimal.InvalidOperation
    assert check_facts(f"It is {long} km long.", f"It is {long} miles long.").status == "fail"


def test_an_amount_with_its_hundredths_after_the_currency_word():
    assert same_value("It costs twelve pounds fifty.", "It costs £12.50.", "It costs 12 pounds 50p.") == (
        "money", ("GBP", Decimal("12.5")))
    assert only("It costs 5 dollars and 20 cents.").value == ("USD", Decimal("5.2"))
    assert [f.value for f in facts("It costs 5 dollars 20 times a year.")] == [("USD", 5), ("number", 20)]


def test_weekday_abbreviations():
    assert [f.value for f in facts("Open Mon-Fri, and on Tue. evenings.")] == [
        ("weekday", 0), ("weekday", 4), ("weekday", 1)]
    assert [f.value for f in facts("Tours run Sat and Sun.")] == [("weekday", 5), ("weekday", 6)]
    assert [f.kind for f in facts("She reads The Sun daily.")] == ["name"]
    assert facts("They sat down.", "weekday") == []


def test_a_fraction_with_a_slash_is_no_number():
    assert facts("About 3/4 of them came in 2019/20.") == []


@pytest.mark.parametrize("answer, reference, status", [
    ("Water boils at 100 °F.", "Water boils at 100 °C.", "fail"),  # one figure on two scales
    ("Water boils at 100 degrees.", "Water boils at 100 °C.", "pass"),  # a bare degree holds either
    ("Water boils at 100 °C.", "Water boils at 100 degrees.", "pass"),
    ("It is on the last Sat. of Sept.", "It is on the last Saturday of September.", "pass"),
    ("It is on the last Sun. of Sept.", "It is on the last Saturday of September.", "fail"),
    ("Open from 1 to 28 February.", "Open from 1 February to 28 February.", "pass"),  # a range's first day
    ("Open from 2 to 28 February.", "Open from 1 February to 28 February.", "fail"),
])
def test_scales_abbreviations_alone_and_day_ranges(answer, reference, status):
    from evalbook.checks.facts import check_facts

    assert check_facts(answer, reference).status == status


def test_an_abbreviation_alone_is_a_month_or_a_weekday_only_after_a_word_of_time():
    from evalbook.checks.facts import extract_facts

    assert [(f.kind, f.text) for f in extract_facts("We met in Jan and again on Sun.")] == [
        ("month", "Jan"), ("weekday", "Sun")]
    assert [(f.kind, f.text) for f in extract_facts("She said Jan sat with Sun Li.")] == [("name", "Jan"), ("name", "Sun Li")]
