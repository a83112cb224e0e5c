"""One model's prompt cache: the cache the worker keeps (`cache.py`), its memory tier
(`trie.py`, lifetimes in `expiry.py`) and its disk tier (`disk.py`; its files read back in
`disk_io.py`, checked in `disk_check.py`)."""
