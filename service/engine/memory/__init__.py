"""The engine's memory: KV bytes per token, the process's budget, the device's limits."""
