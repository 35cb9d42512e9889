"""``decide --market``: each campaign's card priced across providers (an offline study's or a server study's replicas),
its memo section and its report section."""
