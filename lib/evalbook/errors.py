"""The one base of evalbook's failures, and the exit code each kind carries.

Every exception class evalbook raises derives from EvalbookError (most also from the built-in
error they are, ValueError or LookupError, so that callers catching those keep working). The
command line (`__main__`) prints `evalbook: <message>`, after a heading line when the class has
one, and exits with the class's `exit_code`:

- 1 (EvalbookError, RunFailed): a stage or an upload failed; what ran is kept and marked.
- 2 (UnusableInput): the profile, an override, a model, the outputs root, a named run or report,
  or a labels file cannot be used. It is found before anything is written.

The interrupt (evalbook.interrupts.RunInterrupted, exit 128 + the signal) is not one of these: it
is a KeyboardInterrupt, so that code catching Exception lets it through as it does Ctrl-C.
"""

from __future__ import annotations


class EvalbookError(Exception):
    """A failure evalbook names; `exit_code` is what the command line exits with."""

    exit_code = 1

    def heading(self, command: str) -> str | None:
        """The line printed before the message (None: the message alone, after `evalbook: `)."""
        return None


class UnusableInput(EvalbookError):
    """An input that cannot be used, found before anything was written: exit 2."""

    exit_code = 2


class RunFailed(EvalbookError, RuntimeError):
    """A stage failed; the message names the executed notebook and quotes the failing cell."""

    def heading(self, command: str) -> str | None:
        return f"{command} failed"


class PublishFailed(RunFailed):
    """The run finished locally but its upload to the remote outputs root was refused."""

    def heading(self, command: str) -> str | None:
        return "upload failed"
