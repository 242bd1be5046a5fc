"""The lab's own tools (doctor, hosts, progress, presets); torch-free, so the doctor runs where torch is broken."""
