"""One module per `matrixrun` command (two for `history`/`store`, which share the store): the
command's function and everything it imports, at the top of the module.

Nothing here is imported when the parser is built: `cli/main.py`'s table names each command's
function as "module:function", and the module is imported (by importlib) only when that command
runs. So `matrixrun --version` or `--help` costs Python's start and argparse, and each command
pays only for its own imports. This `__init__` imports nothing for the same reason.
"""
