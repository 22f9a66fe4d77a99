"""Running a plan: the runner and its schedule, resuming, the gates, the executors (local,
Slurm), progress, and the two outputs every run ends with (`outputs`: verdict.json, report.md)."""
