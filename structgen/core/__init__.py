"""structgen.core."""
