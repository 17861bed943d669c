"""structgen.frontends.regex."""
