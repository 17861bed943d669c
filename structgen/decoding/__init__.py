"""structgen.decoding: grammar-constrained decoding with lossless drafts.

:mod:`~structgen.decoding.config` (the frozen ``DecodeConfig``), :mod:`~.backend` (the
model-backend protocol and its transformers implementation), :mod:`~.drafts` (draft sources;
the grammar's forced text), :mod:`~.costs` (the pass-cost curve), :mod:`~.sampling` (sampling
and the point-mass verification rule), :mod:`~.stats` and :mod:`~.loop` (the loop, over rows).
"""
