"""The cyclic garbage collector and pmutop's long-lived start-up heap.

Nearly everything pmutop builds at start-up (event tables, the register plan, widgets, the simulated
machine, history buffers) lives until it exits. Left in the collector's generations, every full collection
walks all of it: about 75 ms at 64 simulated cores, on whichever thread allocates at that moment, the UI's
included (a key press then waits). Once the first interval is on screen (batch: once start-up is over, before
the first interval) we collect once and move what is alive into the permanent generation (gc.freeze); later
garbage is collected as before.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_startup_heap() -> None:
    """Once per process, after start-up: collect, then exempt every object alive now from later collections."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()  # the start-up's garbage goes now, not frozen with the rest
    gc.freeze()
