"""``decide`` for a server study: its kept runs, capacity per configuration, replicas and money, its memo."""
