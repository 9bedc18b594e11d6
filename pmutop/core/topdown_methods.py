"""Top-down method names: how top-down analysis is measured on one CPU.

pmutop.pmu.topdown_plan picks the method, pmutop.derive.topdown keys its formulas on it, and Samples and
recordings carry it (Sample.topdown). pmu and derive are peers that may not import each other, so the
names live here, below both. The values are part of the recording format: never change them.
"""

PERF_METRICS = "perf_metrics"  # TOPDOWN.SLOTS on fixed counter 3 plus the PERF_METRICS MSR (Ice Lake and later)
SLOTS4 = "slots4"  # the four-event formula, Sandy Bridge .. Cascade Lake
SLOTS4_SMT = "slots4_smt"  # the same with the AnyThread events, SMT on
GRACEMONT = "gracemont"  # E-cores: TOPDOWN_*.ALL over 5 / 6 / 8 slots per cycle
CRESTMONT = "crestmont"
SKYMONT = "skymont"
TREMONT = "tremont"  # Snow Ridge, Elkhart/Jasper Lake, Lakefield's E-cores: TOPDOWN_*.ALL over 4 slots per cycle
# Goldmont / Goldmont Plus: the issued / retired / not-delivered / recovery formula (Linux's topdown events there),
# 3 resp. 4 slots per cycle
GOLDMONT = "goldmont"
GOLDMONT_PLUS = "goldmont_plus"
ZEN4 = "zen4"  # AMD through perf: 6 resp. 8 dispatch slots per cycle
ZEN5 = "zen5"
