"""Node and pod records, resource math and per-node aggregates.

Raw Kubernetes JSON (from a snapshot file or the API server) is decoded once, at the
edge, into these records; the framework and plugins only ever see records.
"""
