"""Running a plan: the run session (one start and one end), the measurer and the recorders it
writes through, resuming, the gates, the executors (local, Slurm), progress, and the two
outputs every run ends with (`outputs`: verdict.json, report.md)."""
