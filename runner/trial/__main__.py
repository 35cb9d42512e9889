"""``python -m runner.trial SPEC.json OUT_DIR``."""

import sys

from runner.trial.run import main

sys.exit(main(sys.argv[1:]))
