"""The failures that several layers raise and the command line maps to its exit codes.

They live here, at the foundation, so that a module low down (calibrate's context, which finds
the run to calibrate) can raise what the runner raises without importing the runner.
"""

from __future__ import annotations


class RunFailed(RuntimeError):
    """A stage failed; the message names the executed notebook and quotes the failing cell."""
