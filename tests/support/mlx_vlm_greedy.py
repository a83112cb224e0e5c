"""mlx-vlm's own greedy answer for an image prompt, the reference the vision tests hold our
engine to: its `stream_generate` over the prompt as our runtime renders it, never sampling an
id past the tokenizer's (the random models' vocabularies are wider; our engine samples only
decodable ids)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from mlx_responses.service.models.vision_runtime import VisionRuntime
from mlx_responses.service.responses.validation import validate_params
from mlx_responses.service.text.prompt import RenderedPrompt

from mlx_responses.v1 import responses_pb2 as pb
from tests.support.stack import Stack


def greedy_tokens(
    model: Any,
    processor: Any,
    ids: Sequence[int],
    max_tokens: int,
    *,
    mask: bool = False,
    **arrays: np.ndarray | None,
) -> list[int]:
    """mlx-vlm's greedy tokens for the prompt `ids` (at most `max_tokens`; a stop token ends
    them): `arrays`, the processor's (`pixel_values`, `image_grid_thw`, Mistral 3's
    `image_sizes`; None ones left out); `mask`, an all-ones attention mask, as mlx-vlm's
    processor gives it (Gemma 3 reads one)."""
    import mlx.core as mx
    from mlx_vlm import stream_generate

    n = len(processor.tokenizer)
    extra = {key: mx.array(value) for key, value in arrays.items() if value is not None}
    if mask:
        extra["mask"] = mx.ones((1, len(ids)), mx.int32)
    tokens = []
    for result in stream_generate(
        model,
        processor,
        "",
        input_ids=mx.array([list(ids)]),
        max_tokens=max_tokens,
        sampler=lambda logprobs: mx.argmax(logprobs, axis=-1),
        logits_processors=[
            lambda _, logits: mx.where(mx.arange(logits.shape[-1]) < n, logits, -mx.inf)
        ],
        **extra,
    ):
        if result.token is None:
            break
        tokens.append(int(result.token))
    return tokens[:max_tokens]


def rendered_image_request(stack: Stack, text: str, url: str) -> RenderedPrompt:
    """A one-image user message (`text`, then the image at `url`) as the stack's vision
    runtime renders it: its tokens and processed images."""
    assert stack.core is not None
    runtime = stack.core.models.default.runtime
    assert isinstance(runtime, VisionRuntime)
    message = pb.Item()
    message.message.role = pb.ROLE_USER
    message.message.content.add().input_text.text = text
    message.message.content.add().input_image.image_url = url
    params = pb.CreateResponseParams(model=stack.settings.models[0].name)
    params.input.append(message)
    prompt = runtime.render_request(
        params, validate_params(params, runtime.loaded.accepts_name), list(params.input)
    )
    assert prompt.vision is not None and prompt.vision.pixel_values is not None
    return prompt


def mlx_vlm_text(
    stack: Stack, text: str, url: str, max_tokens: int, *, mask: bool = False, loaded: Any = None
) -> str:
    """mlx-vlm's greedy text for a one-image user message, as the stack's runtime renders it
    (`loaded`: mlx-vlm's (model, processor) of the stack's model, loaded here when None)."""
    from mlx_vlm import load

    prompt = rendered_image_request(stack, text, url)
    assert stack.core is not None and prompt.vision is not None
    path = stack.core.models.default.runtime.loaded.path
    model, processor = loaded if loaded is not None else load(str(path))
    tokens = greedy_tokens(
        model,
        processor,
        prompt.tokens,
        max_tokens,
        mask=mask,
        pixel_values=prompt.vision.pixel_values,
        image_grid_thw=prompt.vision.image_grid_thw,
    )
    return str(stack.core.models.default.runtime.loaded.tokenizer.decode(tokens))
