"""The vLLM engine's trial half: the engine (``engine.py``) and the OpenAI-compatible server it may start
(``server.py``). Runs inside the trial only; the host half is the package above."""
