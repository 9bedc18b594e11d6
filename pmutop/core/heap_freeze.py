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
YOUNG_COLLECTION_EVERY = 10_000  # net allocations of container objects between two young collections


def freeze_startup_heap() -> None:
    """Once per process, after start-up: collect, then exempt every object alive now from later collections."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()  # the start-up's garbage goes now, not frozen with the rest
    gc.freeze()
    # Each interval makes thousands of container objects that outlive a young collection by a little (samples,
    # rows, strips): at Python's 700 the young and middle generations were collected several times a second,
    # about 0.4 ms of CPU a second at 2 CPUs and 0.9 at 256 (gc.callbacks). Every 10,000 allocations: the
    # same garbage, about a quarter of the CPU, a pause of a couple of ms.
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
