"""structgen.frontends.json_schema."""
