"""One progress display on stderr: a spinner whose text names the stage (loading model,
preparing vocabulary, compiling, generating), shown only when stderr is a terminal and
``--quiet`` is not given; otherwise nothing (errors and structgen's log lines still go to
stderr). Third-party bars and warnings are kept out of it (:func:`quiet_transformers`).

Example
-------
>>> with Progress(enabled=False) as progress:   # a pipe or --quiet: a no-op
...     progress.stage("loading model")
...     progress.stage("generating")
>>> progress.stages
['loading model', 'generating']
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from typing import Any, Iterator

__all__ = ["Progress", "progress_wanted", "quiet_transformers", "log_to_stderr"]


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


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars ("Loading weights"), its info and warning lines and Python
    warnings off while a model loads; each restored afterwards. The spinner says what happens."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


class _Lowercase(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"structgen: {record.levelname.lower()}: {record.getMessage()}"


def log_to_stderr() -> None:
    """structgen's own warnings (an unwritable cache, ...) as ``structgen: warning: ...`` lines on
    stderr, the way the command line reports errors."""
    logger = logging.getLogger("structgen")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Lowercase())
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
