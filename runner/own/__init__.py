"""Your own data to a first decision: write a study (``init``), tune its quality rule (``tune``), check it (``check``).

One module per command: :mod:`runner.own.init`, :mod:`runner.own.tune`, :mod:`runner.own.check`.
"""
