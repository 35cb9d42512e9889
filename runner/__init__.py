"""isocost host side (CLI, campaign, launchers, demo) and, in ``runner.trial``, the trial."""
