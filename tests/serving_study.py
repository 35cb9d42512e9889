"""The tests' one server study: MLPerf LoadGen's Server scenario at 20 qps, a p90 within 5 s (44 queries decide a
p90), a batcher wait of 10 ms, and the replacement that turns a test workspace's offline study into a server one.
Small enough for a tiny model to serve in seconds, in a process, a container or a Slurm job.

Example::

    study = write_workspace(root, model, n=12, replace=SERVER, extra=TRAFFIC)
"""

from __future__ import annotations

#: The ``[traffic]`` table appended to a test workspace's study.
TRAFFIC = """
[traffic]
rate_qps = 20.0
min_query_count = 44
latency_bound_ms = 5000
latency_percentile = 0.9
max_duration_s = 60
max_wait_ms = 10
seed = 1
"""
#: The replacement that makes a test workspace's study a server study.
SERVER = {'scenario = "offline"': 'scenario = "server"'}
#: A generation's ``[traffic]``: p50 bounds on time to first token and per output token (7 queries decide a p50),
#: 12 queries at 4 qps, bounds loose enough for a loaded 2-core VM.
GENERATION_TRAFFIC = """
[traffic]
rate_qps = 4.0
min_query_count = 12
ttft_bound_ms = 20000
ttft_percentile = 0.5
tpot_bound_ms = 5000
tpot_percentile = 0.5
max_duration_s = 120
max_wait_ms = 20
seed = 2
"""
