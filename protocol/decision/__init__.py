"""The decision, as pure rules: campaigns × catalog × deadline → a ranked, explained choice."""
