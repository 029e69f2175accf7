"""Authentication: bearer tokens to a `Caller`; the org key and Solver key endpoints."""
