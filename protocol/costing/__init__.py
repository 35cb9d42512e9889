"""Costing: plan catalogs, billing, calendars, the measured campaign period, and the declared job's projection."""
