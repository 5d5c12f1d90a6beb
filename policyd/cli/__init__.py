"""The `policyd` command line: parsing only, then calls into the packages below."""
