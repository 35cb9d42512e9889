"""protocol.costing."""
