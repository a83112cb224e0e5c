"""Compaction: summarising a history's older turns into one compaction item."""
