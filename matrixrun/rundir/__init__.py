"""The run directory, the contract between stages: results.jsonl and events.jsonl (`results`),
settings.json (`settings`), env.json and the hardware it records (`environment`, `hardware`)."""
