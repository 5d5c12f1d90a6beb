"""Score rule kinds: each module holds one `ScoreRule` subclass, named by its `kind`."""
