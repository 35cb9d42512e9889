"""runner.demo."""
