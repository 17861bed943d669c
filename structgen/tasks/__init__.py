"""structgen.tasks: JSON, grammar/regex text, SQL and tool calls, each a composition of the
layers below run on a :class:`~structgen.tasks.context.ModelContext`; one result shape
(:mod:`~structgen.tasks.results`)."""
