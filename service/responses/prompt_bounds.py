"""How long a prompt may be: the model's context window, and the operator's `--max-prompt-tokens`.

Either refusal is the seed's 400 `context_length_exceeded` naming `input`, before any prefill, so
a client sees the bound instead of a long prefill (issue #41: a 63k-token prompt took 25 s).
"""

from __future__ import annotations

from mlx_responses.service.errors import Reason, ServiceError


def no_room_for_output(tokens: int, window: int) -> ServiceError:
    """The seed's 400 `context_length_exceeded` for a prompt that fills the context window."""
    return ServiceError(
        Reason.CONTEXT_LENGTH_EXCEEDED,
        f"The input is {tokens} tokens, which leaves no room for output in the model's "
        f"{window}-token context window.",
        param="input",
    )


def check_prompt_bound(tokens: int, bound: int) -> None:
    """Refuses a prompt of more than `bound` tokens (`--max-prompt-tokens`; 0: no bound)."""
    if bound and tokens > bound:
        raise ServiceError(
            Reason.CONTEXT_LENGTH_EXCEEDED,
            f"The input is {tokens} tokens, more than this server's limit of {bound} prompt "
            "tokens (--max-prompt-tokens).",
            param="input",
        )
