"""Cross-cutting: faults, crashes, signals, hostile input, secrets, and DESIGN.md's promises."""
