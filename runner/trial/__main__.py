"""``python -m runner.trial SPEC.json OUT_DIR``."""

import os
import sys

from runner.trial.run import main

code = main(sys.argv[1:])
# Every output is written and fsynced by now; skip the interpreter's (and torch's) slow
# shutdown, which costs about a second per trial and measures nothing.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
