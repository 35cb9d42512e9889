"""`make bench`: what the harness costs, and how the analysis scales (see docs/performance.md)."""
