"""The study: one decision question in a TOML file, read into a frozen, validated value.

``load`` (the file -> :class:`~protocol.study.model.Study`), ``model`` (the records, variants), ``keys`` (what one
key is) and ``schema`` (every key), ``reader`` and ``tables`` (one parser per table), ``init_text`` (the text
``isocost init`` writes), and the study's own matters: ``traffic``, ``schedule``, ``shapes``, ``tuning``,
``time_limits``.
"""
