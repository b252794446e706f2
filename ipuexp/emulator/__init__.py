"""The analytic emulator: memory per IPU and per tile, and the timing of the pipeline schedule, from an
execution plan and the captured graph. Pure functions: no I/O, no global state."""
