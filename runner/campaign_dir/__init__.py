"""The campaign directory format, the host's lowest layer: paths, campaign.json, raw.csv, events, lock, checks."""
