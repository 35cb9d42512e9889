"""Slurm's account of a job (scontrol, sacct) and what each final state means for the trial's row."""

from __future__ import annotations

import pytest

from runner.launch.kinds.slurm.jobs import JobInfo, exit_status, iso_seconds_between, job_end, parse_scontrol_job

#: A real line of Slurm 22.05's ``scontrol -o show job`` (the test cluster), shortened in the middle.
LINE = ("JobId=12 JobName=isocost-0dc0ad87d0d6488a UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 "
        "Nice=0 Account=(null) QOS=(null) JobState=COMPLETED Reason=None Dependency=(null) Requeue=0 Restarts=0 "
        "BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:02 TimeLimit=00:06:00 TimeMin=N/A "
        "SubmitTime=2026-12-01T21:40:54 EligibleTime=2026-12-01T21:40:54 AccrueTime=Unknown "
        "StartTime=2026-12-01T21:40:55 EndTime=2026-12-01T21:40:57 Partition=debug NodeList=node1 BatchHost=node1 "
        "Command=/tmp/a dir/with spaces.sh WorkDir=/tmp/sl-try StdOut=/tmp/x/trial.log TresPerNode=gres:gpu:1")


def test_scontrol_line_is_parsed_with_values_holding_spaces():
    info = parse_scontrol_job(LINE)
    assert (info.job_id, info.name, info.state, info.exit_code, info.node) == (
        "12", "isocost-0dc0ad87d0d6488a", "COMPLETED", "0:0", "node1")
    assert (info.submit_time, info.start_time) == ("2026-12-01T21:40:54", "2026-12-01T21:40:55")
    assert info.final and not info.queued
    pending = parse_scontrol_job("JobId=3 JobName=x JobState=PENDING Reason=Resources ExitCode=0:0 NodeList=")
    assert pending.queued and not pending.final and pending.reason == "Resources" and pending.node == ""


def test_sacct_line():
    info = JobInfo.from_sacct("7|isocost-ab|CANCELLED by 0|0:15|2026-12-01T10:00:00|2026-12-01T10:00:01|"
                              "2026-12-01T10:00:09|node1|None")
    assert (info.state, info.exit_code, info.node) == ("CANCELLED", "0:15", "node1")


@pytest.mark.parametrize("code, status", [("0:0", 0), ("3:0", 3), ("0:15", -15), ("0:9", -9), ("143:0", 143),
                                          ("", None)])
def test_exit_status(code, status):
    assert exit_status(code) == status


def _info(state: str, exit_code: str = "0:0", reason: str = "None") -> JobInfo:
    return JobInfo("9", "lane", state, reason, exit_code, "", "", "", "node1")


def test_final_states_map_onto_the_row():
    assert job_end(_info("COMPLETED")).exit_code == 0 and job_end(_info("COMPLETED")).note == ""
    failed = job_end(_info("FAILED", "3:0", "NonZeroExitCode"))
    assert failed.exit_code == 3 and "FAILED" in failed.note
    assert job_end(_info("OUT_OF_MEMORY", "0:125")).oom_killed
    assert job_end(_info("TIMEOUT", "0:15")).timed_out
    assert job_end(_info("DEADLINE")).timed_out
    for state in ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL"):
        end = job_end(_info(state, "0:0", "NodeDown"))
        assert end.lost and end.interrupted and "lost" in end.note


def test_cancelled_says_who_cancelled():
    assert job_end(_info("CANCELLED", "0:15"), cancelled_by_us="timeout").timed_out
    assert job_end(_info("FAILED", "1:0"), cancelled_by_us="timeout").timed_out  # it ended by itself on TERM
    assert job_end(_info("NODE_FAIL"), cancelled_by_us="timeout").lost
    assert job_end(_info("CANCELLED", "0:15"), cancelled_by_us="interrupt").interrupted
    outside = job_end(_info("CANCELLED", "0:15"))
    assert outside.interrupted and "outside isocost" in outside.note and not outside.lost


def test_queue_seconds_across_clock_offsets():
    assert iso_seconds_between("2026-12-01T21:54:47.766+00:00", "2026-12-01T22:54:48.211+01:00") == pytest.approx(0.445)
    assert iso_seconds_between("2026-12-01T21:54:47", "2026-12-01T21:54:48+00:00") is None  # no offset: no guess
    assert iso_seconds_between("", "x") is None
