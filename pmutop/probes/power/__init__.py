"""Frequency, idle states, temperature and energy beside the counters (turbostat's columns): one class per
data source (MSRs, cpuidle, hwmon, powercap), combined per CPU by `PowerMonitor`."""
