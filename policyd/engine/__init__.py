"""The scheduling cycle over cluster state, shared by the daemon, explain and simulate."""
