"""runner.campaign_dir."""
