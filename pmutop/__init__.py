"""pmutop: a live per-core hardware performance counter monitor."""

__version__ = "0.1.0"
