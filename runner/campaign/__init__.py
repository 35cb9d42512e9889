"""runner.campaign."""
