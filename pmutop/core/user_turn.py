"""The user's turn: while the live view answers a key, pmutop's background Python threads pause.

One interpreter lock serves every Python thread. A key that lands while a background thread works (the
simulator's round of 256 CPUs, the top-task lookup) is answered at half speed or worse: the two threads
take turns holding the lock, 5 ms at a time (sys.getswitchinterval). So the live view says when a key's
answer starts (`begin`) and when it is on screen (`end`), and the background loops call `wait()` between
small steps of their work (one CPU, one process): they sleep while the user waits. A turn ends by itself
after MAX_TURN_S, so a view that never says `end` (it failed mid-answer) delays the loops once, briefly.

Before the view sees the key at all, Textual's input thread and then its event loop each need the lock: with
the default switch interval each waits up to 5 ms at every step while a background thread computes, so the
live view shortens it (favour_user).

The cycle collector waits too: at 256 CPUs a young collection walks some 15,000 young objects (5-12 ms), and
one that began inside a key's answer made that key as much slower. Automatic collection is off during the
turn and back on at its end (or when it lapses); the objects are collected just after.

Process-wide, like the lock it works around: one instance, USER_TURN."""

from __future__ import annotations

import gc
import sys
import threading
import time

MAX_TURN_S = 0.15  # longer than any key's answer at 256 CPUs; the samples of that round are late by at most this
# A thread woken by a key waits at most this long for the interpreter lock at each step (CPython's default: 5 ms).
# More hand-offs happen only while two threads want the lock at once, which in the live view is seldom.
SWITCH_INTERVAL_S = 0.001


class UserTurn:
    def __init__(self) -> None:
        self._free = threading.Event()
        self._free.set()
        self._until = 0.0
        self._collection_paused = False  # automatic collection turned off by this turn (not by someone else)
        self.waits = 0  # how many times a background loop paused for the user (tests)

    def begin(self) -> None:
        """A key (or click) is being answered: background loops and the collector pause at their next step."""
        self._until = time.monotonic() + MAX_TURN_S
        self._free.clear()
        if not self._collection_paused and gc.isenabled():
            gc.disable()
            self._collection_paused = True

    def end(self) -> None:
        """The answer is on screen: the loops and the collector go on."""
        self._free.set()
        self._resume_collection()

    def _resume_collection(self) -> None:
        if self._collection_paused:
            self._collection_paused = False
            gc.enable()

    @property
    def active(self) -> bool:
        if self._free.is_set():
            return False
        if time.monotonic() < self._until:
            return True
        self._resume_collection()  # lapsed: the view never said end()
        return False

    def wait(self) -> None:
        """A background loop's step: returns at once unless the user's turn is on (one flag test)."""
        if self._free.is_set():
            return
        remaining = self._until - time.monotonic()
        if remaining > 0:
            self.waits += 1
            if self._free.wait(remaining):
                return
        if time.monotonic() >= self._until:  # lapsed (the view never said end()), and no new turn began since
            self._resume_collection()


USER_TURN = UserTurn()


def favour_user() -> None:
    """The live view's start: shorter turns of the interpreter lock (see the module's note)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
