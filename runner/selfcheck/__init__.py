"""``isocost selfcheck`` on the host (:mod:`runner.selfcheck.host`) and the files carried to a GPU machine that
has no network (:mod:`runner.selfcheck.carry`). The checks themselves run in ``runner.trial.selfcheck``.
"""
