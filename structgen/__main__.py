"""``python -m structgen``: the ``structgen`` command line (:mod:`structgen.cli`)."""

from structgen.cli import main

if __name__ == "__main__":  # imported (by pkgutil, doctest), it runs nothing
    main()
