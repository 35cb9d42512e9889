"""An offline study's decision as text: decision.md (the memo, the declared job, nothing fits) and report.html."""
