"""runner.own."""
