"""runner.bundle."""
