"""Running a campaign: freeze the study, choose the launcher, run the rotated schedule, gather rows, resume."""
