"""The decide stage on the host: read campaign directories, write decision.json, decision.md and report.html."""
