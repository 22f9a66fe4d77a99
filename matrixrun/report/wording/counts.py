"""The shared words, re-exported where `run/runner.py` still reads them: they live in
`core/words.py` (counted nouns, the one word per outcome and reason), which every other stage
and the report's own sections import. Goes once the runner imports `core.words`."""

from matrixrun.core.words import REASON_WORDS, outcome, plural, reason

__all__ = ["REASON_WORDS", "outcome", "plural", "reason"]
