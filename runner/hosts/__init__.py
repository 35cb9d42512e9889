"""Several hosts at once: host specs, checks before a run, one campaign per host in parallel, progress board."""
