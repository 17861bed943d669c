"""structgen's version (a module of its own, so every layer may read it)."""

__version__ = "0.1.0"
