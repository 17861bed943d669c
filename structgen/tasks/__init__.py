"""structgen.tasks."""
