"""One progress display on stderr: a spinner whose text names the stage (loading model,
preparing vocabulary, compiling, generating), shown only when stderr is a terminal and
``--quiet`` is not given; otherwise nothing (errors and structgen's log lines still go to
stderr, above the spinner). transformers' own bars and warnings stay out of it: structgen's
loads silence them (:func:`structgen.decoding.models.quiet_loading`).

Example
-------
>>> with Progress(enabled=False) as progress:   # a pipe or --quiet: a no-op
...     progress.stage("loading model")
...     progress.stage("generating")
>>> progress.stages
['loading model', 'generating']
"""

from __future__ import annotations

import logging
import sys
from typing import Any

__all__ = ["Progress", "progress_wanted", "log_to_stderr"]


def progress_wanted(quiet: bool) -> bool:
    """Whether to show the spinner: not ``--quiet``, and stderr is a terminal (a log file or a
    pipe gets no control characters)."""
    return not quiet and sys.stderr is not None and sys.stderr.isatty()


class Progress:
    """A rich spinner on stderr whose text changes with the stage; a no-op when not ``enabled``.

    ``stages`` records each stage entered, shown or not.
    """

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.stages: list[str] = []
        self._status: Any = None

    def stage(self, text: str) -> None:
        self.stages.append(text)
        if not self.enabled:
            return
        if self._status is None:
            from rich.console import Console

            self._status = Console(stderr=True).status(text)
            self._status.start()
        else:
            self._status.update(text)

    def stop(self) -> None:
        """Take the spinner off the terminal (before streamed text or an error is written)."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _Stderr(logging.Handler):
    """Log lines as ``structgen: warning: ...`` on whatever ``sys.stderr`` is when they are
    written: while the spinner runs, rich's proxy, which prints them above it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"structgen: {record.levelname.lower()}: {record.getMessage()}\n")
        except Exception:  # logging must never break the command
            self.handleError(record)


def log_to_stderr() -> None:
    """structgen's own warnings (an unwritable cache, ...) as ``structgen: warning: ...`` lines on
    stderr, the way the command line reports errors."""
    logger = logging.getLogger("structgen")
    if not logger.handlers:
        logger.addHandler(_Stderr())
        logger.setLevel(logging.WARNING)
        logger.propagate = False
