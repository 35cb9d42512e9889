"""The versioned records stages exchange, on one codec: what every file isocost writes holds, typed.

``codec`` (frozen dataclass <-> JSON, ``schema_version`` checked), ``domains`` (the values a number may take),
``versions`` (the 1.0 versions of files that carry none), ``stages`` (trial spec, status, campaign, verdicts),
``manifest``, ``raw_columns`` and ``raw_record`` (raw.csv), ``summary`` and ``serving`` (summary.json),
``selfcheck`` (selfcheck.json).
"""
