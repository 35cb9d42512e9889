"""runner/launch/daemon/."""
