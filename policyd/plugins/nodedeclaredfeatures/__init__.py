"""NodeDeclaredFeatures: pods that need a feature only some nodes declare."""
