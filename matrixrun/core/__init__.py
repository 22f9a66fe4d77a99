"""The shared types every stage speaks: a measurement's line format, metrics and units, the
verdict's typed values, rerun reasons, the time scale, cell x/series helpers, and the two
string disciplines (secret redaction, Markdown safety). Imports nothing else of matrixrun, so
any stage may import it."""
