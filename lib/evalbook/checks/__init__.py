"""Checks: what can be asserted of an answer exactly and for free, before any judge (issue 48).

`protocol` is what every check gives (pass, fail or error with a reason, and a pass rate with its
Wilson interval per run); `facts` takes the facts of an answer and its reference (numbers,
money, units, times, dates, weekdays, months, names) and says which changed, which nothing
supports, and which the answer adds beyond the reference; `assertions` are the user's own.
"""
