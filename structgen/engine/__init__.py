"""structgen.engine."""
