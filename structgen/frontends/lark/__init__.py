"""structgen.frontends.lark."""
