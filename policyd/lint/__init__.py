"""Linting policy files: the lint run, and reporters by name.

Kept import-light on purpose: `policyd lint` must answer in well under a second, so
nothing here pulls in the engine or the Kubernetes client.
"""
