"""The optional compiled kernel ``compiled_dfa.c`` and whether to use it.

It is built from source by pip at install when the machine has a C compiler; without it every
caller runs its Python path, which stays the reference the kernel is tested against
(``tests/test_dfa_kernel.py``: the Lark lexer's token split; ``tests/test_determinize_kernel.py``:
rule automata; ``tests/test_liveness.py``: grammar liveness; ``tests/test_grammar_facts_kernel.py``:
follow bytes). ``STRUCTGEN_DFA_KERNEL=0`` turns it off.

>>> isinstance(kernel_available(), bool)
True
"""

from __future__ import annotations

import os

try:
    from structgen.core import compiled_dfa as kernel  # type: ignore[attr-defined]
except ImportError:  # not built: no C compiler at install
    kernel = None

__all__ = ["KERNEL_VERSION", "kernel", "kernel_available"]

#: The ``compiled_dfa.c`` this package speaks to (``KERNEL_VERSION`` there).
KERNEL_VERSION = 9


def kernel_available() -> bool:
    """Whether the kernel runs: it was built at install, is the version this package speaks to,
    and ``STRUCTGEN_DFA_KERNEL`` is not ``0``."""
    return (kernel is not None and getattr(kernel, "VERSION", None) == KERNEL_VERSION
            and os.environ.get("STRUCTGEN_DFA_KERNEL", "1") != "0")
