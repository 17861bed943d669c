"""structgen.api."""
