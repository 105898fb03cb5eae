"""Planning: spec + input + state -> a frozen, priced, hashed plan."""
