"""Linting policy files: the lint run, reporters by name, and the registry of rule ids.

Kept import-light on purpose: `policyd lint` must answer in well under a second, so
nothing here pulls in the engine or the Kubernetes client.
"""
