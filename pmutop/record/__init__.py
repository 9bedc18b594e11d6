"""Recordings: every sample of a run as JSON lines (gzip for .gz), replayed and compared later."""
