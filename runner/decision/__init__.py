"""runner.decision."""
