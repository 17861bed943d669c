"""Loading the model the command line generates with: the embedded default model, or
``--model DIR``, a local transformers model directory (never a hub name: nothing is downloaded).

A directory that is not a model, or a model structgen cannot read the vocabulary of, is a
:class:`~structgen.cli.output.CliError` with exit code 5 (model loading).

Example
-------
>>> try:
...     load_model("/nonexistent/model")
... except CliError as err:
...     print(err.exit_code, err.format_message())
5 --model '/nonexistent/model' is not a directory
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from structgen.cli.output import EXIT_MODEL, CliError
from structgen.decoding.models import default_model, quiet_loading

__all__ = ["load_model"]


def load_model(directory: str | None, *, threads: int | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from ``directory`` (``None``: the embedded default model), in eval
    mode; ``threads``: torch's CPU thread count (default: torch's own).

    Raises
    ------
    CliError
        Exit code 5: not a directory, no ``config.json`` in it, or transformers cannot load it.
    ModelNotInstalledError
        The default model's package is not installed (the message says how to install it).
    """
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    if directory is None:
        return default_model()  # loaded quietly (no transformers bars or warnings)
    path = Path(directory)
    if not path.is_dir():
        raise CliError(f"--model {directory!r} is not a directory", EXIT_MODEL, kind="ModelLoadError")
    if not (path / "config.json").is_file():
        raise CliError(f"--model {directory!r} is not a transformers model directory (it has no config.json)",
                       EXIT_MODEL, kind="ModelLoadError")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # Subnormal floats take a slow path on x86 CPUs (DESIGN.md: 10x per token); the default
    # model's loader sets this too.
    torch.set_flush_denormal(True)
    try:
        with quiet_loading(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. deprecation notes about the model's config
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
    except Exception as err:  # transformers raises OSError, ValueError, KeyError, ... for a bad directory
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CliError(f"cannot load the model in {directory!r}: {message}", EXIT_MODEL,
                       kind="ModelLoadError") from err
    return model.eval(), tokenizer
