"""Comparing two runs, example by example (05_compare).

- `gates`: what the two runs may be compared on (the same judge, model pins, k);
- `settings`: the bootstrap, tolerance and regressions of a comparison, and their defaults;
- `document`: pairing, paired rows and regressions, the compare-v1 document and its writing;
- `slices`: the paired deltas within each slice level of the candidate, against the rest;
- `checks`: the checks that newly fail in the candidate, example by example, and those fixed;
- `context`: `open_comparison`, the setup of the 05 notebook;
- `tables`, `figures`: what 05 shows.

The paired statistics (deltas, bootstrap intervals, better/worse shares) are in evalbook.stats.
"""

from evalbook.errors import UnusableInput


class ComparisonError(UnusableInput, ValueError):
    """Two reports that cannot be compared, or a comparison that is not valid compare-v1."""
