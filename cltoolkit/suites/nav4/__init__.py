"""The nav4 suite."""
