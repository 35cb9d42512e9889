"""Launchers run one trial in a fresh process or container and report how it ended."""

from runner.launch.launcher import HostInterrupt, Launcher, LaunchResult, TrialPaths

__all__ = ["HostInterrupt", "LaunchResult", "Launcher", "TrialPaths"]
