"""The end-to-end benchmark, split by concern: cluster shapes (`shapes`), the API
server side (`cluster`), the schedulers under test (`schedulers`, `null_scheduler`),
the modes (`modes`, `pacing`), placement checks (`placement`), metrics (`scrape`) and
the report (`report`). The entry point is `python -m bench.e2e_bench`."""
