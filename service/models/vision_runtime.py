"""A loaded vision-language model: its processor renders images into the prompt.

A `--model` folder whose config.json has a `vision_config` is served through mlx-vlm: the
chat template renders each image part as the model's image placeholder, the prompt is encoded
as a text prompt is (client text stays text), each placeholder becomes its image's tokens
(service/models/vision_tokens.py) and the processor gives the pixels. The model's EngineWorker
encodes the images and batches the request with the model's others (service/engine/vision/).
Text-only models keep ModelRuntime.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mlx_responses.service.engine.declared_tokenizer import as_declared
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.model import LoadedModel, context_length_of, sampling_defaults
from mlx_responses.service.engine.requests import (
    LogitsProcessor,
    SamplingParams,
)
from mlx_responses.service.engine.worker import EngineWorker, GenerationStream
from mlx_responses.service.errors import invalid
from mlx_responses.service.models.runtime import ModelRuntime
from mlx_responses.service.models.vision_tokens import (
    NOT_PER_TOKEN,
    Placeholder,
    expand_images,
    image_placeholder,
    placeholder_starts,
)
from mlx_responses.service.text.compaction_items import CompactionDecodeError
from mlx_responses.service.text.media import (
    MEDIA_KINDS,
    DecodedImage,
    MediaLimits,
    decode_part,
    has_media,
)
from mlx_responses.service.text.prompt import (
    RenderedPrompt,
    generation_start,
    render_prompt,
    system_turn_end,
    tools_to_template,
)
from mlx_responses.service.text.request_json import RequestJson
from mlx_responses.service.text.retention import Retention

from mlx_responses.v1 import responses_pb2 as pb

# OpenAI's `detail: low`: the image fits in 512x512 before the processor sees it.
LOW_DETAIL_SIDE = 512


def load_vision_model(folder: Path, alias: str) -> LoadedModel:
    """Loads a VLM folder with mlx-vlm (on the engine thread): the model and its processor."""
    from mlx_lm.tokenizer_utils import TokenizerWrapper
    from mlx_vlm import load

    folder = folder.expanduser().resolve()
    model, processor = load(str(folder))
    processor.tokenizer = as_declared(folder, processor.tokenizer)
    config = json.loads((folder / "config.json").read_text())
    temperature, top_p = sampling_defaults(folder)
    tokenizer = TokenizerWrapper(processor.tokenizer)
    loaded = LoadedModel(
        model=model,
        tokenizer=tokenizer,
        path=folder,
        alias=alias,
        context_length=context_length_of(config),
        created=int(time.time()),
        vocab_size=int(
            config.get("vocab_size")
            or (config.get("text_config") or {}).get("vocab_size")
            or len(processor.tokenizer)
        ),
        default_temperature=temperature,
        default_top_p=top_p,
        processor=processor,
    )
    return loaded


class VisionRuntime(ModelRuntime):
    """A VLM's prompts (images included) and its engine; grammars and tools as for text."""

    reads_media = True

    def __init__(self, loaded: LoadedModel, worker: EngineWorker, limits: MediaLimits) -> None:
        super().__init__(loaded, worker)
        self.processor = loaded.processor
        self.limits = limits
        self._placeholder: Placeholder | None = None

    def render_request(
        self,
        params: pb.CreateResponseParams,
        parsed: RequestJson,
        items: Sequence[pb.Item],
        *,
        decode_media: bool = True,
    ) -> RenderedPrompt:
        """The prompt with every image decoded and expanded into its tokens.

        `decode_media=False` (a background job's admission) renders each image as the bare
        placeholder, undecoded: the job decodes in its queued phase (pipeline.decode_media).
        A prompt without images (and a legacy completions `prompt`) renders as a text model's.
        """
        if params.HasField("prompt") or not has_media(items):
            return super().render_request(params, parsed, items, decode_media=decode_media)
        offset = len(items) - len(params.input)
        # Where an image stood in the text, until the messages are built around it: drawn
        # per request, so no client text can spell it.
        mark = f"\ue000image-{secrets.token_hex(8)}\ue000"
        marked: list[pb.Item] = []
        images: list[DecodedImage] = []
        for k, item in enumerate(items):
            if item.WhichOneof("item") != "message" or not any(
                p.WhichOneof("part") in MEDIA_KINDS for p in item.message.content
            ):
                marked.append(item)
                continue
            copy = pb.Item()
            copy.CopyFrom(item)
            for j, part in enumerate(copy.message.content):
                if part.WhichOneof("part") not in MEDIA_KINDS:
                    continue
                where = f"input[{k - offset}].content[{j}]" if k >= offset else "input"
                if decode_media:
                    images.append(decode_part(part, where, self.limits))
                part.input_text.text = mark
            marked.append(copy)
        tools = params.tools if params.tool_choice.mode != pb.TOOL_CHOICE_MODE_NONE else []
        from mlx_responses.service.text.prompt import items_to_messages

        try:
            messages = items_to_messages(
                params.instructions if params.HasField("instructions") else None, marked
            )
        except CompactionDecodeError as exc:
            raise invalid(str(exc), "input", "invalid_compaction") from exc
        for message in messages:
            content = message.get("content")
            if isinstance(content, str) and mark in content:
                message["content"] = _split(content, mark)
        tokenizer = self.loaded.tokenizer
        rendered_tools = tools_to_template(tools, parsed.tool_parameters) if tools else None
        try:
            text = render_prompt(
                tokenizer,
                messages,
                rendered_tools,
                dict(parsed.template_kwargs),
                tokenizer.think_start,
            )
        except ValueError as exc:
            raise invalid(str(exc), "input", "invalid_prompt") from exc
        points: tuple[int, ...] = ()
        if images and self.worker.takes_checkpoints:
            # A hybrid model's entries (Qwen3.5): where the system turn ends, and where the
            # generation prompt begins (the next turn shares the prompt to there).
            args = (tokenizer, messages, rendered_tools, dict(parsed.template_kwargs))
            points = (system_turn_end(*args, text.tokens), generation_start(*args, text))
        prompt = self._process(text, images, points) if images else text
        if params.cache_breakpoints:
            # NOTE: marks are not looked for in an image prompt (its images expand after the
            # template); the entry holds the whole prompt, so that is what a mark asked for.
            prompt = replace(prompt, marked_end=len(prompt.tokens))
        return prompt

    def _process(
        self, text: RenderedPrompt, images: list[DecodedImage], points: tuple[int, ...] = ()
    ) -> RenderedPrompt:
        """The prompt's ids with each image's tokens in its part's place, and its pixels;
        `points`: the system turn's end and the generation prompt's start in the text's tokens
        (0: none), carried to the expanded prompt's."""
        if self._placeholder is None:
            self._placeholder = image_placeholder(self.loaded.tokenizer)
        pictures = [_sized(image) for image in images]
        tokens, arrays = expand_images(text.tokens, self._placeholder, self.processor, pictures)
        end, start = _expanded(points, text.tokens, tokens, self._placeholder) if points else (0, 0)
        inputs = VisionInputs(
            pixel_values=arrays.get("pixel_values"),
            image_grid_thw=arrays.get("image_grid_thw"),
            image_keys=tuple(f"{i.sha256}:{i.detail or 'auto'}" for i in images),
            extra={k: v for k, v in arrays.items() if k not in NOT_PER_TOKEN},
        )
        return RenderedPrompt(
            text=text.text,
            tokens=tokens,
            opens_reasoning=text.opens_reasoning,
            vision=inputs,
            system_end=end,
            generation_start=start,
        )

    def _enqueue(
        self,
        tokens: Sequence[int],
        sampling: SamplingParams,
        processors: list[LogitsProcessor],
        vision: object | None,
        *,
        checkpoints: Sequence[int],
        retention: Retention,
    ) -> GenerationStream:
        inputs = vision if isinstance(vision, VisionInputs) else None
        return self.worker.submit(
            tokens, sampling, processors, checkpoints, vision=inputs, retention=retention
        )


def _expanded(
    points: tuple[int, ...], text: list[int], tokens: list[int], placeholder: Placeholder
) -> tuple[int, ...]:
    """Positions in the text prompt's tokens, in the prompt with its images expanded: as they
    were before the first image part, moved by what the images added after the last one, 0
    inside them (or 0 already)."""
    starts = placeholder_starts(text, placeholder)
    first, last = starts[0], starts[-1] + len(placeholder.tokens)
    grown = len(tokens) - len(text)
    return tuple(p if 0 < p <= first else p + grown if p >= last else 0 for p in points)


def _split(content: str, mark: str) -> list[dict[str, str]]:
    """Text with image marks as chat-template content parts: text and image, in order."""
    parts: list[dict[str, str]] = []
    for k, piece in enumerate(content.split(mark)):
        if k:
            parts.append({"type": "image"})
        if piece:
            parts.append({"type": "text", "text": piece})
    return parts


def _sized(image: DecodedImage) -> Any:
    """The image as the processor gets it: `detail: low` fits it in 512x512 first."""
    picture = image.image
    if image.detail == "low" and max(picture.size) > LOW_DETAIL_SIDE:
        picture = picture.copy()
        picture.thumbnail((LOW_DETAIL_SIDE, LOW_DETAIL_SIDE))
    return picture
