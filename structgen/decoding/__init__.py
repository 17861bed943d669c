"""structgen.decoding."""
