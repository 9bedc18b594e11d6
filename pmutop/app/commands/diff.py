"""`pmutop diff A B`: two recordings compared per core and per metric."""

from __future__ import annotations

import shutil

from pmutop.app.options import diff_parser


def run_diff(argv: list[str]) -> int:
    from pmutop.recording.diff import diff_table
    from pmutop.recording.reader import read_recording

    args = diff_parser().parse_args(argv)
    a, b = read_recording(args.a), read_recording(args.b)
    print(diff_table(a, b, shutil.get_terminal_size().columns), flush=True)
    return 0
