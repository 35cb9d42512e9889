"""runner.hosts."""
