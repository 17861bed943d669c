"""structgen.frontends."""
