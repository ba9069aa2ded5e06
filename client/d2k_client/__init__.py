"""d2k: the command-line client of the D2K Portal's REST API (no Django, no torch)."""

__version__ = "0.1.0"
