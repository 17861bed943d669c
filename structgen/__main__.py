"""``python -m structgen``: the ``structgen`` command line (:mod:`structgen.cli`)."""

from structgen.cli import main

main()
