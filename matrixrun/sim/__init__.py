"""The built-in simulated engine: a real HTTP server process with a performance model.

`core/profile.py` is the pure model (what a decode step costs); `server.py` serves SGLang's
native and the OpenAI APIs over real HTTP with continuous batching; `python -m matrixrun.sim`
accepts SGLang's launch_server command line plus `--profile`.
"""
