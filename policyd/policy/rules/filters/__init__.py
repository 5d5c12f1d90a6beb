"""Filter rule kinds: each module holds one `FilterRule` subclass, named by its `kind`."""
