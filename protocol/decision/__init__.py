"""protocol.decision."""
