"""The decide stage on the host: read campaign directories, write decision.json, decision.md and report.html.

Grouped by product line, the question a decision answers: ``offline/`` (an offline study: its memo, the declared
job, report.html), ``serving/`` (a server study: kept runs, capacity, replicas, its memo), ``market/`` (``--market``,
prices across providers, for either). A change is made along one line (a server-study fix touches its stage, runs and
memo together); grouping by role (memo/, charts/, stages/) would spread one question over four folders and keep the
prefixes (``memo/serving.py``, ``stages/serving_market.py``). Shared by the lines: ``stage.py`` (decide and compare:
open, dispatch, write under ``--out``), ``inputs.py`` and ``crosscheck.py`` (what is read), ``redecide.py`` (for
verify), ``period_report.py``, and ``render/``. The rules themselves are pure: :mod:`protocol.decision`.
"""
