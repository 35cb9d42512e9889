"""Which raw rows leave their pass to be run again (issue 11, defect 1)."""

from __future__ import annotations

import pytest

from runner.campaign_dir.raw_table import HOST_STOP_NOTE, is_host_stopped


@pytest.mark.parametrize(("status", "notes", "stopped"), [
    ("interrupted", f"{HOST_STOP_NOTE} this trial (Ctrl-C or SIGTERM)", True),
    ("interrupted", f"{HOST_STOP_NOTE} before recording this trial; found on --resume", True),
    ("error", f"x; outputs not fetched; {HOST_STOP_NOTE} for this host", True),
    # The pass completed: final, whatever the notes say (the host was stopping as it finished).
    ("ok", f"{HOST_STOP_NOTE} this trial (Ctrl-C or SIGTERM)", False),
    ("ok", "the trial ended by itself after the host CLI had gone; recorded from its directory on --resume", False),
    ("interrupted", "killed by signal 9 (a kill from outside)", False),
    ("oom", "", False),
])
def test_only_a_pass_the_host_stopped_before_it_completed_runs_again(status, notes, stopped):
    assert is_host_stopped({"status": status, "notes": notes}) is stopped

