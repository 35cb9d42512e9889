"""Serving runs in the trial (issue 36): MLPerf LoadGen's Server scenario against a task's model.

- :mod:`runner.trial.serving.batcher` the declared dynamic batcher (maximum batch, maximum wait), one worker thread;
- :mod:`runner.trial.serving.sut` the system under test: the corpus as LoadGen's query sample library (ids stay
  the ids), the model behind the batcher, every answer kept by query and id, each query's times;
- :mod:`runner.trial.serving.loadgen_run` one run: LoadGen's settings from a study's ``[traffic]``
  (:mod:`protocol.study.traffic`), the run, LoadGen's logs and the harness's files in the output folder;
- :mod:`runner.trial.serving.summary` ``mlperf_log_summary.txt`` as a record, the trace's per-query times.

Not wired into the trial or the study yet (docs/serving.md). LoadGen comes from the ``serving`` extra
(``mlcommons-loadgen``), imported by ``loadgen_run`` only.

Example::

    system = ServingSystem(model, samples, TRIAL_TASK.lines, BatcherSettings(max_batch=8, max_wait_ms=5.0))
    run = run_server(system, ServerSettings.from_traffic(traffic, 2.0), out)
"""
