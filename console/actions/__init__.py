"""The one registry of operations the console can run, and its audit log."""
