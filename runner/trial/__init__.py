"""The trial: runs inside a fresh process or container, the only code importing torch.

Usage: ``python -m runner.trial SPEC.json OUT_DIR``. Reads the spec, verifies
the inputs' fingerprints, loads the model, warms up, runs the measured pass
and writes ``predictions.jsonl``, ``manifest.json`` and ``status.json``.
"""
