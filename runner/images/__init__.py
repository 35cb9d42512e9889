"""runner.images."""
