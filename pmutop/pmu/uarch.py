"""CPU signature (vendor, display family/model, stepping) → microarchitecture / code name.

Hand-written table. Names are for display only: nothing in pmutop should branch on them.
Intel model numbers match Linux `intel-family.h` and Intel's perfmon `mapfile.csv`; AMD ranges follow
the Zen-generation switch in Linux `arch/x86/kernel/cpu/amd.c`.
"""

from __future__ import annotations

# Intel family 6, one name per model.
_INTEL_FAM6: dict[int, str] = {
    # Atom (Bonnell .. Airmont)
    0x1C: "Bonnell",
    0x26: "Bonnell",
    0x27: "Saltwell",
    0x35: "Saltwell",
    0x36: "Saltwell",
    0x37: "Silvermont (Bay Trail)",
    0x4A: "Silvermont (Merrifield)",
    0x4D: "Silvermont (Avoton / Rangeley)",
    0x5A: "Silvermont (Moorefield)",
    0x4C: "Airmont (Cherry Trail / Braswell)",
    # Nehalem .. Broadwell
    0x1A: "Nehalem",
    0x1E: "Nehalem",
    0x1F: "Nehalem",
    0x2E: "Nehalem-EX",
    0x25: "Westmere",
    0x2C: "Westmere-EP",
    0x2F: "Westmere-EX",
    0x2A: "Sandy Bridge",
    0x2D: "Sandy Bridge-E/EP",
    0x3A: "Ivy Bridge",
    0x3E: "Ivy Bridge-E/EP",
    0x3C: "Haswell",
    0x45: "Haswell",
    0x46: "Haswell",
    0x3F: "Haswell-E/EP",
    0x3D: "Broadwell",
    0x47: "Broadwell",
    0x4F: "Broadwell-E/EP",
    0x56: "Broadwell-DE",
    # Skylake and its client derivatives (0x8E/0x9E/0x55 are split by stepping below)
    0x4E: "Skylake",
    0x5E: "Skylake",
    0xA5: "Comet Lake",
    0xA6: "Comet Lake-U",
    0x66: "Cannon Lake",
    # Sunny Cove .. today, big cores
    0x7D: "Ice Lake",
    0x7E: "Ice Lake",
    0x9D: "Ice Lake (NNPI)",
    0x6A: "Ice Lake-SP",
    0x6C: "Ice Lake-D",
    0xA7: "Rocket Lake",
    0x8C: "Tiger Lake",
    0x8D: "Tiger Lake",
    0x8F: "Sapphire Rapids",
    0xCF: "Emerald Rapids",
    0xAD: "Granite Rapids",
    0xAE: "Granite Rapids-D",
    0xD7: "Bartlett Lake",
    # Hybrid (P + E cores)
    0x8A: "Lakefield",
    0x97: "Alder Lake",
    0x9A: "Alder Lake",
    0xB7: "Raptor Lake",
    0xBA: "Raptor Lake",
    0xBF: "Raptor Lake",
    0xAA: "Meteor Lake",
    0xAC: "Meteor Lake",
    0xC5: "Arrow Lake",
    0xC6: "Arrow Lake",
    0xB5: "Arrow Lake-U",  # Meteor Lake cores (perfmon maps it to the MTL event files)
    0xBD: "Lunar Lake",
    0xCC: "Panther Lake",
    0xD5: "Wildcat Lake",
    # Atom / E-core only parts since Goldmont
    0x5C: "Goldmont (Apollo Lake)",
    0x5F: "Goldmont (Denverton)",
    0x7A: "Goldmont Plus (Gemini Lake)",
    0x86: "Snow Ridge (Tremont)",
    0x96: "Elkhart Lake (Tremont)",
    0x9C: "Jasper Lake (Tremont)",
    0xBE: "Alder Lake-N (Gracemont)",
    0xAF: "Sierra Forest (Crestmont)",
    0xB6: "Grand Ridge (Crestmont)",
    0xDD: "Clearwater Forest (Darkmont)",
    # Xeon Phi
    0x57: "Knights Landing",
    0x85: "Knights Mill",
}

# Models whose name depends on the stepping: ((first, last, name), ...), fallback name.
_INTEL_FAM6_STEPPINGS: dict[int, tuple[tuple[tuple[int, int, str], ...], str]] = {
    0x55: (
        ((0, 4, "Skylake-SP/X"), (5, 7, "Cascade Lake"), (10, 11, "Cooper Lake")),
        "Cascade Lake / Cooper Lake",  # steppings 0-4 are all Skylake; later ones use CLX events
    ),
    0x8E: (
        (
            (0, 8, "Kaby Lake"),
            (9, 9, "Kaby Lake / Amber Lake"),
            (10, 10, "Kaby Lake-R / Coffee Lake-U"),
            (11, 11, "Whiskey Lake"),
            (12, 12, "Whiskey Lake / Comet Lake / Amber Lake"),
        ),
        "Kaby Lake / Coffee Lake",
    ),
    0x9E: (
        ((0, 9, "Kaby Lake"), (10, 13, "Coffee Lake")),
        "Kaby Lake / Coffee Lake",
    ),
}

# Intel families beyond 6 (family 0xF base + extended family).
_INTEL_OTHER: dict[tuple[int, int], str] = {
    (0x12, 0x01): "Nova Lake",
    (0x12, 0x03): "Nova Lake",
    (0x13, 0x01): "Diamond Rapids",
}

# AMD: (family, first model, last model, name). First match wins.
_AMD: tuple[tuple[int, int, int, str], ...] = (
    (0x15, 0x00, 0x01, "Bulldozer"),
    (0x15, 0x02, 0x1F, "Piledriver"),
    (0x15, 0x30, 0x3F, "Steamroller"),
    (0x15, 0x60, 0x7F, "Excavator"),
    (0x16, 0x00, 0x0F, "Jaguar"),
    (0x16, 0x30, 0x3F, "Puma"),
    # Family 17h: Zen+ is model 0x08 (Pinnacle Ridge) and 0x18 (Picasso), inside the Zen 1 ranges.
    (0x17, 0x08, 0x08, "Zen+ (Pinnacle Ridge)"),
    (0x17, 0x18, 0x18, "Zen+ (Picasso)"),
    (0x17, 0x01, 0x01, "Zen (Summit Ridge / Naples)"),
    (0x17, 0x11, 0x11, "Zen (Raven Ridge)"),
    (0x17, 0x00, 0x2F, "Zen"),
    (0x17, 0x50, 0x5F, "Zen"),
    (0x17, 0x30, 0x3F, "Zen 2 (Rome)"),
    (0x17, 0x60, 0x67, "Zen 2 (Renoir)"),
    (0x17, 0x68, 0x6F, "Zen 2 (Lucienne)"),
    (0x17, 0x70, 0x7F, "Zen 2 (Matisse)"),
    (0x17, 0x90, 0x91, "Zen 2 (Van Gogh)"),
    (0x17, 0xA0, 0xAF, "Zen 2 (Mendocino)"),
    (0x17, 0x40, 0x4F, "Zen 2"),
    (0x19, 0x00, 0x0F, "Zen 3 (Milan)"),
    (0x19, 0x10, 0x1F, "Zen 4 (Genoa)"),
    (0x19, 0x20, 0x2F, "Zen 3 (Vermeer)"),
    (0x19, 0x40, 0x4F, "Zen 3+ (Rembrandt)"),
    (0x19, 0x50, 0x5F, "Zen 3 (Cezanne)"),
    (0x19, 0x30, 0x3F, "Zen 3"),
    (0x19, 0x60, 0x6F, "Zen 4 (Raphael)"),
    (0x19, 0x70, 0x7F, "Zen 4 (Phoenix)"),
    (0x19, 0xA0, 0xAF, "Zen 4c (Bergamo / Siena)"),
    (0x19, 0x80, 0x9F, "Zen 4"),
    (0x1A, 0x00, 0x1F, "Zen 5 (Turin)"),
    (0x1A, 0x20, 0x2F, "Zen 5 (Strix Point)"),
    (0x1A, 0x40, 0x4F, "Zen 5 (Granite Ridge)"),
    (0x1A, 0x60, 0x6F, "Zen 5 (Krackan Point)"),
    (0x1A, 0x70, 0x7F, "Zen 5 (Strix Halo)"),
    (0x1A, 0x50, 0x5F, "Zen 6"),
    (0x1A, 0x80, 0xAF, "Zen 6"),
    (0x1A, 0xC0, 0xCF, "Zen 6"),
)


def microarchitecture(vendor: str, family: int, model: int, stepping: int) -> str | None:
    """Display name for a CPU signature (display family/model), or None when unknown."""
    if vendor == "GenuineIntel":
        if family == 6:
            by_stepping = _INTEL_FAM6_STEPPINGS.get(model)
            if by_stepping is not None:
                ranges, fallback = by_stepping
                for first, last, name in ranges:
                    if first <= stepping <= last:
                        return name
                return fallback
            return _INTEL_FAM6.get(model)
        return _INTEL_OTHER.get((family, model))
    if vendor == "AuthenticAMD":
        for fam, first, last, name in _AMD:
            if fam == family and first <= model <= last:
                return name
        return None
    if vendor == "HygonGenuine" and family == 0x18:
        return "Dhyana (Zen)"
    return None
