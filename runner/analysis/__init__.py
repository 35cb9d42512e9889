"""The validate and summarize stages: re-derive every verdict, then summarize the raw table."""
