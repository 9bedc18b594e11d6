"""What the tests share: sysroots and CPUID dumps to build machines from, what this machine has (declared once in
`flags`), Pilot and process helpers, and a `pmutop serve` for exporter tests."""
