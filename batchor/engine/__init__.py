"""Engine: executes a compiled plan (realtime now, batch later), emitting events."""
