"""The trial halves of the engines (``runner.trial.engines.base``), one module per built-in engine."""
