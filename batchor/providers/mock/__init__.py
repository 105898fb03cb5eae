"""The offline rehearsal provider (`realtime` only): deterministic, free answers."""
