"""runner.analysis."""
