"""Profiles: which plugins run at which extension point, with which weights and args."""
