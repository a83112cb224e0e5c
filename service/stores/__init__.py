"""Response and conversation stores: an async interface and the in-memory default."""
