"""One model's KV memory, owned in one place: live sequences, the prompt cache, the budget.

The worker asks this store, and nothing else, about KV memory:
- `check` (on the asyncio side, before a request is queued): a request whose prompt plus
  `max_output_tokens` could never fit the process's budget is refused (a 400 naming its size
  and the budget);
- `admit` / `release` (on the engine thread): a sequence starts only when its reservation fits
  beside the other models, the live sequences and the prompt cache; when it does not, the prompt
  cache gives memory back first (its least recently used entries; with a disk tier they were
  written there when kept, so they are served from disk later), and then the request waits;
- `fetch` / `keep` / `settle`: the prompt cache's entries and checkpoints (memory tier and disk
  tier, `prompt_cache.py`), bounded by `--prompt-cache-max-bytes` less the live sequences' bytes
  (as the scheduler reports them) and by what the budget leaves.

Without a budget (`--memory-limit` unset on a CPU) admission is by count only, as before, and
the store still reports the model's memory by kind for the metrics.
"""

from __future__ import annotations

from typing import Any

from mlx_responses.service.engine.memory.budget import ModelAccount
from mlx_responses.service.engine.prompt_cache import PromptCache


class KVStore:
    """The KV memory of one model: its account in the budget and its prompt cache."""

    def __init__(self, prompt: PromptCache | None, account: ModelAccount | None) -> None:
        self.prompt = prompt
        self.account = account

    # --- the asyncio side --------------------------------------------------------------------
    def check(self, prompt_tokens: int, max_tokens: int) -> None:
        """Raises MemoryLimitError for a request that could never fit the budget."""
        if self.account is not None:
            self.account.check(prompt_tokens, max_tokens)

    # --- the engine thread ---------------------------------------------------------------------
    def fetch(self, prompt: list[int], scope: str) -> tuple[list[Any] | None, list[int]]:
        """The cache of the longest cached prefix of `prompt` and the tokens still to prefill."""
        if self.prompt is None:
            return None, prompt
        return self.prompt.fetch(prompt, scope)

    def keep(self, scope: str, tokens: list[int], cache: list[Any]) -> None:
        """An entry (a checkpoint or a finished turn) into the prompt cache."""
        if self.prompt is None:
            return
        self.prompt.keep(scope, tokens, cache)
        self._counted()

    def admit(self, uid: int, prompt_tokens: int, max_tokens: int) -> bool:
        """Reserves a sequence's KV if it fits now (the prompt cache gives memory back first);
        False: it must wait for memory."""
        account = self.account
        if account is None:
            return True
        tokens = account.reservation(prompt_tokens, max_tokens)
        short = account.shortfall(tokens)
        if short and self.prompt is not None:
            self.prompt.memory.trim_to(n_bytes=max(0, self.prompt.memory.nbytes - short))
            self._counted()
            short = account.shortfall(tokens)
        if short:
            return False
        account.admit(uid, tokens)
        return True

    def release(self, uid: int) -> None:
        """A sequence ended (finished, cancelled or failed): its reservation goes."""
        if self.account is not None:
            self.account.release(uid)

    def settle(self, live_bytes: int) -> None:
        """Trims the prompt cache to what is left beside the live sequences: `live_bytes` (the
        scheduler's report) against --prompt-cache-max-bytes, and what the budget leaves."""
        if self.prompt is None:
            return
        self.prompt.trim(live_bytes)
        room = self.account.cache_room() if self.account is not None else None
        if room is not None and self.prompt.memory.nbytes > room:
            self.prompt.memory.trim_to(n_bytes=room)
        self._counted()

    def _counted(self) -> None:
        if self.prompt is not None:
            self.prompt.stats.prompt_cache_bytes = self.prompt.memory.nbytes
            if self.account is not None:
                with self.account.budget.lock:
                    self.account.prompt_cache = self.prompt.memory.nbytes

    def flush(self, timeout: float) -> None:
        if self.prompt is not None:
            self.prompt.flush(timeout)

    def close(self) -> None:
        """The model unloaded: the prompt cache and the account go."""
        if self.prompt is not None:
            self.prompt.close()
            self.prompt = None
        if self.account is not None:
            self.account.close()
            self.account = None
