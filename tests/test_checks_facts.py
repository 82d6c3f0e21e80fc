"""The fact check (evalbook.checks.facts.check_facts): which answers are wrong because a fact
changed, which state a fact that nothing supports, and what is only reported (facts beyond the
reference, facts the answer leaves out)."""

from __future__ import annotations

import json

import pytest

from evalbook.checks.facts import CHECK, FactSettings, check_facts
from evalbook.checks.protocol import CheckOutcome


def passes(answer: str, reference: str, context: str | None = None, **settings) -> CheckOutcome:
    outcome = check_facts(answer, reference, context, FactSettings(**settings))
    assert outcome.status == "pass", outcome.reason
    return outcome


def fails(answer: str, reference: str, context: str | None = None, **settings) -> CheckOutcome:
    outcome = check_facts(answer, reference, context, FactSettings(**settings))
    assert outcome.status == "fail", outcome.reason
    return outcome


# ---------------------------------------------------------------- the examples

def test_a_changed_number_word_fails_saying_both():
    outcome = fails("Spiders have six legs.", "Spiders have eight legs.")
    assert outcome.check == CHECK == "facts"
    assert outcome.reason == "six: the reference says eight"
    assert outcome.details["changed"] == [{"kind": "number", "answer": "six", "reference": "eight"}]


def test_the_same_temperature_in_two_scales_and_words_passes():
    passes("Water boils at 100 °C (212 °F) at sea level.",
           "Water boils at 100 degrees Celsius at sea level.")


def test_a_changed_amount_fails_saying_both():
    outcome = fails("The ticket costs £15.", "The ticket costs £14.")
    assert outcome.reason == "£15: the reference says £14"
    assert outcome.details["changed"] == [{"kind": "money", "answer": "£15", "reference": "£14"}]


def test_a_changed_fact_fails_even_when_the_context_mentions_the_answers_value():
    context = "Adult tickets cost £14. A family ticket costs £15. The museum opens at 10:00."
    outcome = fails("An adult ticket costs £15.", "Adult tickets cost £14.", context)
    assert outcome.details["changed"] == [{"kind": "money", "answer": "£15", "reference": "£14"}]


@pytest.mark.parametrize("answer, reference, said", [
    ("The ferry sails on Thursday.", "The ferry sails on Tuesday.", "Thursday: the reference says Tuesday"),
    ("The meeting starts at 13:00.", "The meeting starts at 11:00.", "13:00: the reference says 11:00"),
    ("The capital of Canada is Toronto.", "The capital of Canada is Ottawa.", "Toronto: the reference says Ottawa"),
    ("The wall fell in 1990.", "The wall fell in 1989.", "1990: the reference says 1989"),
    ("It rose 30%.", "It rose 25 per cent.", "30%: the reference says 25 per cent"),
    ("It closes in April.", "It closes in March.", "April: the reference says March"),
    ("It is 5 km long.", "It is 5 miles long.", "5 km: the reference says 5 miles"),
    ("She came 2nd.", "She came third.", "2nd: the reference says third"),
    ("The wall fell on 10 November 1989.", "The wall fell on 9 November 1989.",
     "10 November 1989: the reference says 9 November 1989"),
    ("The wall fell in 1990.", "The wall fell on 9 November 1989.", "1990: the reference says 9 November 1989"),
    ("It closes on Sundays.", "It closes on Mondays.", "Sundays: the reference says Mondays"),
])
def test_a_fact_of_the_same_kind_replaced_is_changed(answer, reference, said):
    assert fails(answer, reference).reason == said


def test_an_unsupported_fact_fails_without_a_context():
    outcome = fails("The tower was finished in 1889 by Eiffel.", "The tower was built by Eiffel.")
    assert outcome.details["unsupported"] == [{"kind": "year", "answer": "1889"}]
    assert outcome.reason == "1889: the reference does not hold it, and there is no context"


def test_an_unsupported_fact_fails_when_the_context_does_not_hold_it_either():
    outcome = fails("The tower was finished in 1889 by Eiffel.", "The tower was built by Eiffel.",
                    "The tower, built by Eiffel's company, is 330 metres tall.")
    assert outcome.reason == "1889: neither the reference nor the context holds it"


def test_a_fact_the_context_holds_beyond_the_reference_is_reported_not_failed():
    context = "The tower, built by Eiffel's company, was finished in 1889 and is 330 metres tall."
    outcome = passes("The tower was finished in 1889 by Eiffel.", "The tower was built by Eiffel.", context)
    assert outcome.details["beyond_reference"] == [{"kind": "year", "answer": "1889"}]
    assert "1889" in outcome.reason and "beyond the reference" in outcome.reason


def test_the_profile_can_fail_facts_beyond_the_reference():
    context = "The tower was finished in 1889."
    outcome = fails("It was finished in 1889.", "It was finished.", context, fail_beyond_reference=True)
    assert outcome.reason == "1889: only the context holds it, not the reference"


def test_a_reference_fact_the_answer_leaves_out_is_missing_and_reported():
    outcome = passes("The tower is in Paris.", "The tower is in Paris and is 330 metres tall.")
    assert outcome.details["missing"] == [{"kind": "quantity", "reference": "330 metres"}]
    assert "330 metres" in outcome.reason


def test_the_profile_can_fail_missing_facts():
    outcome = fails("The tower is in Paris.", "The tower is in Paris and is 330 metres tall.", fail_missing=True)
    assert outcome.reason == "330 metres: the answer leaves it out"


def test_the_reference_side_of_a_change_is_not_reported_missing_as_well():
    outcome = check_facts("It costs £15.", "It costs £14.")
    assert outcome.details["missing"] == []


def test_an_answer_with_no_fact_passes_saying_there_was_nothing_to_check():
    outcome = passes("It is a lovely place to visit with friends.", "Visitors enjoy it with friends.")
    assert outcome.reason.startswith("no fact to check")
    assert all(outcome.details[key] == [] for key in ("changed", "unsupported", "beyond_reference", "missing"))


def test_an_answer_with_no_fact_still_lists_what_it_leaves_out():
    outcome = passes("It is lovely.", "It opened in 1889.")
    assert outcome.reason.startswith("no fact to check")
    assert outcome.details["missing"] == [{"kind": "year", "reference": "1889"}]
    assert fails("It is lovely.", "It opened in 1889.", fail_missing=True).reason == "1889: the answer leaves it out"


def test_a_passing_answer_says_which_facts_the_reference_holds():
    outcome = passes("It costs £14 on Thursday.", "On Thursday it costs 14 pounds.")
    assert "£14" in outcome.reason and "Thursday" in outcome.reason


# ---------------------------------------------------------------- equal in other words

@pytest.mark.parametrize("answer, reference", [
    ("It costs £14.", "It costs 14 pounds."),
    ("It rose 25%.", "It rose 25 per cent."),
    ("It opens at 9 p.m.", "It opens at 21:00."),
    ("It opens at 9pm.", "It opens at 9 p.m."),
    ("It opens at half past nine.", "It opens at 9:30."),
    ("It opens at 9:30.", "It opens at 21:30."),
    ("It closes at noon.", "It closes at 12:00."),
    ("It closes at midnight.", "It closes at 12 a.m."),
    ("The wall fell on November 9, 1989.", "The wall fell on 9 November 1989."),
    ("The wall fell on 1989-11-09.", "The wall fell on the 9th of November 1989."),
    ("The wall fell in 1989.", "The wall fell on 9 November 1989."),
    ("The wall fell in November.", "The wall fell on 9 November 1989."),
    ("The wall fell on a Thursday, 9 November 1989.", "The wall fell on 9 November 1989."),
    ("About 1,000 people came.", "About one thousand people came."),
    ("About 1000 people came.", "About 1,000 people came."),
    ("She came 3rd.", "She came third."),
    ("Open 9-5.", "Open 9 a.m. to 5 p.m."),
    ("Open 9 a.m. to 5 p.m.", "Open 9-5."),
    ("It fell to -5 °C.", "It fell to minus five degrees Celsius."),
    ("It weighs 10 kg.", "It weighs 10,000 grams."),
    ("It is 3 miles long.", "It is 4.8 km long."),
    ("It lasted two years.", "It lasted 24 months."),
    ("It costs 14.", "It costs £14."),
    ("It costs £14.", "It costs 14."),
    ("It was built in the 1990s.", "It was built in 1995."),
])
def test_the_same_fact_in_other_words_passes(answer, reference):
    passes(answer, reference)


def test_a_negative_number_is_not_its_opposite():
    assert fails("It fell to -5.", "It fell to 5.").details["changed"][0]["answer"] == "-5"


def test_a_twelve_hour_time_is_not_a_different_minute():
    assert fails("It opens at 9:45.", "It opens at 9:30.").reason == "9:45: the reference says 9:30"


def test_a_more_precise_figure_in_the_same_unit_is_not_the_same():
    fails("It is 5.4 km long.", "It is 5 km long.")


# ---------------------------------------------------------------- names

@pytest.mark.parametrize("answer, reference", [
    ("Dr. Smith led the study.", "The study was led by Smith."),
    ("The study was led by Smith.", "The study was led by Dr. Smith."),
    ("It was led by Dr. John Smith.", "It was led by John Smith."),
    ("It is in the U.S. and it grew.", "It is in the US and it grew."),
    ("It is in the US and it grew.", "It is in the United States and it grew."),
    ("It joined the UN in 1945.", "It joined the United Nations in 1945."),
    ("It was built by Eiffel's company.", "It was built by the company of Eiffel."),
    ("It is sold by AT&T in the US.", "It is sold by AT&T in the US."),
])
def test_name_variants_are_not_changes(answer, reference):
    passes(answer, reference)


def test_a_name_the_reference_writes_in_lower_case_is_held():
    passes("It is near the Eiffel Tower.", "It is near the eiffel tower.")


def test_a_name_at_the_start_of_the_reference_holds_the_answers_name():
    passes("The capital of France is Paris.", "Paris is the capital of France.")


def test_another_name_in_the_same_place_is_changed_even_when_the_context_has_it():
    context = "The plan was written by Jenny Smith with Nic Hansen, a grower, in Hobart."
    outcome = fails("The plan was written by Nic Hansen.", "The plan was written by Jenny Smith.", context)
    assert outcome.reason == "Nic Hansen: the reference says Jenny Smith"


def test_a_context_name_added_elsewhere_is_beyond_the_reference_not_a_change():
    context = "Grower Nic Hansen, in Tasmania, welcomed the plan that Hort Innovation released in May."
    outcome = passes("Nic Hansen welcomed the plan released in Tasmania.",
                     "The plan was released by Hort Innovation.", context)
    assert {item["answer"] for item in outcome.details["beyond_reference"]} == {"Nic Hansen", "Tasmania"}
    assert outcome.details["missing"] == [{"kind": "name", "reference": "Hort Innovation"}]


# ---------------------------------------------------------------- words that are facts only sometimes

def test_one_as_a_pronoun_is_no_fact():
    passes("The one Sunday sailing leaves the harbour.", "There is a single Sunday sailing from the harbour.")


def test_only_one_is_a_fact():
    fails("There is only one sailing.", "There are two sailings.")


def test_may_as_a_verb_is_not_a_month():
    passes("It may open in June.", "It opens in June.")


def test_march_as_a_verb_is_not_a_month():
    passes("The bands march on 4 July.", "The bands parade on July 4.")


def test_a_plural_weekday_is_the_weekday():
    passes("It closes on Sundays.", "It is closed every Sunday.")


def test_the_first_word_of_a_sentence_is_not_a_name_on_its_own():
    passes("Arachnids like spiders have eight legs.", "Spiders have eight legs.")


def test_a_first_word_that_is_a_name_elsewhere_in_the_row_is_one():
    assert fails("Toronto is the capital.", "Ottawa is the capital.",
                 "The capital is Ottawa, and Toronto is larger.").reason == "Toronto: the reference says Ottawa"
    passes("Toronto is the capital.", "Ottawa is the capital.")  # without the row's help, neither is a name


# ---------------------------------------------------------------- what the outcome holds

def test_details_are_plain_json():
    outcome = check_facts("It costs £15 on 9 November 1989 at 9 p.m. in Paris.",
                          "It costs £14 on 10 November 1989 at 8 p.m. in Lyon.", "Some context, 1989.")
    assert json.loads(json.dumps(outcome.details)) == outcome.details
    assert set(outcome.details) == {"changed", "unsupported", "beyond_reference", "missing"}


def test_reasons_are_plain_text_not_html():
    outcome = fails("It is sold by <b>AT&T</b> for £15.", "It is sold by AT&T for £14.")
    assert outcome.reason == "£15: the reference says £14"
    outcome = fails("It was made by Johnson & Johnson.", "It was made by Procter & Gamble.")
    assert "&amp;" not in outcome.reason and "Johnson & Johnson" in outcome.reason


def test_several_problems_are_joined_in_one_reason_in_the_answers_order():
    outcome = fails("It costs £15 and opened in 1889.", "It costs £14.")
    assert outcome.reason == ("£15: the reference says £14; "
                              "1889: the reference does not hold it, and there is no context")


def test_a_fact_repeated_in_the_answer_is_reported_once():
    outcome = fails("It costs £15. Yes, £15.", "It costs £14.")
    assert len(outcome.details["changed"]) == 1


def test_an_empty_answer_has_no_fact_to_check():
    assert passes("", "It costs £14.").reason.startswith("no fact to check")


def test_titles_written_out_are_the_same_name():
    passes("It was run by Doctor Smith near Mount Everest.", "It was run by Dr. Smith near Mt. Everest.")


def test_a_swapped_place_in_a_race_is_changed():
    assert fails("She finished second.", "She finished first.").reason == "second: the reference says first"


def test_an_acronym_at_a_sentence_start_is_a_name_and_matches_initials_across_and():
    outcome = passes("NASA launched it.", "The National Aeronautics and Space Administration launched it.")
    assert "NASA" in outcome.reason


def test_a_sentence_keeps_its_full_stop_after_pm():
    assert fails("It starts at 4pm.", "It starts at 15:00.").reason == "4pm: the reference says 15:00"


def test_the_numbering_of_a_list_is_no_fact():
    answer = "To apply:\n1. Log in.\n2. Pay the £14 fee.\n3) Wait (1) week or (2) weeks."
    assert [item["answer"] for item in check_facts(answer, "Pay £14.").details["unsupported"]] == []
    assert fails("Steps:\n1. Pay £15.", "Pay £14.").reason == "£15: the reference says £14"


def test_a_value_changed_to_one_the_reference_has_elsewhere_is_changed():
    outcome = fails("It has 6 rooms and 6 doors.", "It has 5 rooms and 6 doors.")
    assert outcome.reason == "6: the reference says 5"
    passes("It has 6 doors. Yes, 6 doors.", "It has 6 doors.")


def test_the_answers_one_new_name_for_the_references_one_left_out_is_changed():
    context = "The house was designed by Bunny Williams for Southern Living."
    assert fails("Southern Living.", "Bunny Williams.", context).reason == \
        "Southern Living: the reference says Bunny Williams"


def test_a_context_name_in_another_place_among_the_facts_is_beyond_the_reference():
    context = "The Golden Gate Bridge opened in 1937. It is painted International Orange."
    outcome = passes("It opened in 1937 and is painted International Orange.",
                     "The Golden Gate Bridge opened in 1937.", context)
    assert outcome.details["beyond_reference"] == [{"kind": "name", "answer": "International Orange"}]
    assert fails("The Brooklyn Bridge opened in 1937.", "The Golden Gate Bridge opened in 1937.",
                 context).reason == "Brooklyn Bridge: the reference says Golden Gate Bridge"


def test_a_peoples_adjective_and_its_country_hold_each_other():
    passes("It is the French capital.", "It is the capital of France.")
    passes("It is the capital of France.", "It is the French capital.")
    assert fails("It is the German capital.", "It is the capital of France.").reason == \
        "German: the reference says France"


def test_the_same_figure_in_another_unit_is_changed_even_when_the_context_has_it():
    context = "The bag weighs 5 kg and the walk is 5 km."
    assert fails("The bag weighs 5 km.", "The bag weighs 5 kg.", context).reason == "5 km: the reference says 5 kg"
    assert fails("It costs 20%.", "It costs £20.", "A 20% tip; it costs £20.").reason == "20%: the reference says £20"


def test_a_month_the_context_holds_beside_the_references_whole_date_is_beyond_the_reference():
    # a date the answer keeps whole also keeps its month and year: another month is no change
    context = "The treaty was signed on 3 March 1921. Talks on trade resumed in October."
    outcome = passes("The treaty was signed on 3 March 1921, and trade talks resumed in October.",
                     "The treaty was signed on 3 March 1921.", context)
    assert outcome.details["beyond_reference"] == [{"kind": "month", "answer": "October"}]
    passes("It was signed on 3 March 1921; a copy went on show in 1950.",
           "It was signed on 3 March 1921.", "A copy went on show in 1950.")


@pytest.mark.parametrize("answer", [
    "The three steps are: 1. Book a slot online. 2. Pay the £14 fee. 3. Bring your card.",
    "The three steps are: 1) Book a slot online. 2) Pay the £14 fee. 3) Bring your card.",
])
def test_the_numbering_of_a_list_written_on_one_line_is_no_fact(answer):
    passes(answer, "There are three steps: book a slot, pay the £14 fee and bring your card.")


def test_a_figure_after_a_colon_that_numbers_no_list_is_a_fact():
    assert fails("The answer is: 42. That settles it.", "The answer is 41.").reason == "42: the reference says 41"
    assert fails("Steps: 1. Pay £15. 2. Wait.", "Pay £14.").reason == "£15: the reference says £14"


def test_an_acronyms_plural_is_the_acronym():
    context = "The old API was retired in June, and the CEO's office said why."
    passes("Both APIs were retired in June, the CEOs said.", "Both were retired in June.", context)


@pytest.mark.parametrize("answer, reference, context", [
    ("The ring of the lantern has no end and stands for the year's cycle (the Spring and Winter).",
     "The ring of the Harvest lantern has no end and stands for the year's cycle. Its candles stand "
     "for Hope and Peace.",
     "The ring of the Harvest lantern has no end and stands for the year's cycle (the Spring and Winter). "
     "Its candles stand for Hope and Peace."),
    ("After the fire at the Maple Court flats in Leeds, crews asked for help.",
     "Volunteers from the Hillside Chapel gave the families a place to stay.",
     "After the fire at the Maple Court flats in Leeds, crews asked for help. Volunteers from the "
     "Hillside Chapel gave the families a place to stay."),
])
def test_a_context_name_that_shares_only_the_or_and_with_a_left_out_name_is_not_a_change(
        answer, reference, context):
    # "the" and "and" stand beside any name: they do not put one name in another's place
    outcome = passes(answer, reference, context)
    assert outcome.details["changed"] == []


def test_a_lede_in_capitals_is_no_name_even_where_the_context_writes_it():
    context = "THE GROWTH of the two parks has been slow, says the Parks Trust."
    outcome = passes("THE GROWTH of the two parks has been slow.", "The Parks Trust says the two parks grew slowly.",
                     context)
    assert outcome.details["changed"] == [] and outcome.details["beyond_reference"] == []
