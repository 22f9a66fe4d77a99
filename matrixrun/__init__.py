"""matrixrun: turn an experiment spec into a verified verdict document.

The data flows one way: spec -> plan -> run (results.jsonl) -> analysis (verdict.json) -> report.
"""

__version__ = "0.1.0"
