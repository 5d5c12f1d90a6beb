"""The `policyd` command line: parsing only, then calls into the packages below.

Every command module is imported to build the app, so each command imports what it
calls inside its own function: `policyd lint` and `--help` must not pay for the engine,
numpy or the Kubernetes client (`tests/unit/cli/test_startup_imports.py`).
"""
