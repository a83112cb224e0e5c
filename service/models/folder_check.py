"""A model folder's own files, validated like a request body before anything uses them.

`check_folder` reads `config.json`, `tokenizer_config.json`, `generation_config.json` and the
chat template files (`chat_template.jinja`, `chat_template.json`), and raises
`ModelFolderError` naming the folder, the file and the field of the first thing it cannot
serve: at startup the pool turns it into a ConfigError (exit 2), while serving into a 400 for
requests naming that model only (models/pool.py). Only the shapes the server and mlx-lm rely
on are checked; unknown fields pass. Read before anything imports MLX.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

# config.json fields read as positive integers (top level or under text_config), when present.
INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "max_sequence_length",
    "n_positions",
    "seq_length",
    "sliding_window",
    "max_window_layers",
)
ZERO_OK = ("sliding_window", "max_window_layers")  # 0: none
OBJECT_FIELDS = ("text_config", "vision_config", "quantization", "rope_scaling")
TOKEN_FIELDS = ("bos_token", "eos_token", "pad_token", "unk_token")
# transformers' own tag inside assistant turns (`{% generation %}`): plain Jinja lacks it.
_GENERATION_TAG = re.compile(r"{%-?\s*(end)?generation\s*-?%}")
MAX_FILE = 64 << 20  # bytes of a JSON or template file read (tokenizer_config.json: a few MB)


class ModelFolderError(ValueError):
    """A model folder's file that cannot be served; the message names folder, file and field."""

    def __init__(self, folder: Path, file: str, message: str) -> None:
        super().__init__(f"model folder {folder}: {file}: {message}")
        self.folder = folder
        self.file = file


def _read(folder: Path, name: str, *, required: bool = False) -> str | None:
    path = folder / name
    if not path.is_file():
        if required:
            raise ModelFolderError(folder, name, "missing")
        return None
    try:
        if path.stat().st_size > MAX_FILE:
            raise ModelFolderError(folder, name, f"larger than {MAX_FILE >> 20} MiB")
        return path.read_bytes().decode()
    except UnicodeDecodeError:
        raise ModelFolderError(folder, name, "not UTF-8 text") from None
    except OSError as exc:
        raise ModelFolderError(folder, name, f"unreadable ({exc.strerror})") from None


def _object(folder: Path, name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ModelFolderError(folder, name, f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ModelFolderError(folder, name, f"must be a JSON object, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def check_config(folder: Path) -> dict[str, Any]:
    """`config.json`, checked: an object whose known sections are objects and whose known
    sizes are positive integers."""
    config = _object(folder, "config.json", _read(folder, "config.json", required=True) or "")
    for field in OBJECT_FIELDS:
        value = config.get(field)
        if value is not None and not isinstance(value, dict):
            raise ModelFolderError(
                folder, "config.json", f"`{field}` must be an object, not {_kind(value)}"
            )
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ModelFolderError(folder, "config.json", "`model_type` must be text")
    for prefix, section in (("", config), ("text_config.", config.get("text_config") or {})):
        for field in INT_FIELDS:
            value = section.get(field)
            low = 0 if field in ZERO_OK else 1
            if value is not None and (type(value) is not int or value < low):
                raise ModelFolderError(
                    folder,
                    "config.json",
                    f"`{prefix}{field}` must be an integer of at least {low}, "
                    f"not {json.dumps(value)[:40]}",
                )
    return config


def _template(folder: Path, file: str, field: str, text: Any) -> None:
    """A chat template: text that parses as Jinja."""
    import jinja2

    if not isinstance(text, str):
        raise ModelFolderError(folder, file, f"`{field}` must be text, not {_kind(text)}")
    try:
        jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(
            _GENERATION_TAG.sub("", text)
        )
    except jinja2.TemplateSyntaxError as exc:
        raise ModelFolderError(
            folder, file, f"`{field}` is not a Jinja template (line {exc.lineno}: {exc.message})"
        ) from None


def check_tokenizer_config(folder: Path) -> None:
    """`tokenizer_config.json`, where present: an object; its chat template(s) parse; its
    special tokens are text, an object with `content` text, or null."""
    name = "tokenizer_config.json"
    text = _read(folder, name)
    if text is None:
        return
    config = _object(folder, name, text)
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
        for i, named in enumerate(template):
            if not isinstance(named, dict) or not isinstance(named.get("name"), str):
                raise ModelFolderError(
                    folder, name, f"`chat_template[{i}]` must be an object with a `name`"
                )
            _template(folder, name, f"chat_template[{i}].template", named.get("template"))
    elif template is not None:
        _template(folder, name, "chat_template", template)
    for field in TOKEN_FIELDS:
        token = config.get(field)
        if isinstance(token, dict):
            token = token.get("content")
        if token is not None and not isinstance(token, str):
            raise ModelFolderError(
                folder, name, f"`{field}` must be text or an object with `content` text"
            )
    length = config.get("model_max_length")
    if length is not None and (type(length) not in (int, float) or length <= 0):
        raise ModelFolderError(folder, name, "`model_max_length` must be a positive number")


def check_generation_config(folder: Path) -> None:
    """`generation_config.json`, where present: an object whose sampling defaults are
    numbers in range and whose `eos_token_id` is a token id or a list of them."""
    name = "generation_config.json"
    text = _read(folder, name)
    if text is None:
        return
    config = _object(folder, name, text)
    for field, low, high in (("temperature", 0.0, math.inf), ("top_p", 0.0, 1.0)):
        value = config.get(field)
        if value is None:
            continue
        if type(value) not in (int, float) or not low <= value <= high:
            raise ModelFolderError(
                folder, name, f"`{field}` must be a number in [{low}, {high}], not {value!r}"
            )
    sample = config.get("do_sample")
    if sample is not None and not isinstance(sample, bool):
        raise ModelFolderError(folder, name, "`do_sample` must be true or false")
    eos = config.get("eos_token_id")
    ids = eos if isinstance(eos, list) else [eos]
    if eos is not None and not all(type(i) is int and i >= 0 for i in ids):
        raise ModelFolderError(folder, name, "`eos_token_id` must be a token id or a list of them")


def check_templates(folder: Path) -> None:
    """`chat_template.jinja` and `chat_template.json`, where present."""
    text = _read(folder, "chat_template.jinja")
    if text is not None:
        _template(folder, "chat_template.jinja", "the template", text)
    text = _read(folder, "chat_template.json")
    if text is not None:
        config = _object(folder, "chat_template.json", text)
        _template(folder, "chat_template.json", "chat_template", config.get("chat_template"))


def check_folder(folder: Path) -> dict[str, Any]:
    """Every file of `folder` the server reads before its weights; its config.json."""
    config = check_config(folder)
    check_tokenizer_config(folder)
    check_generation_config(folder)
    check_templates(folder)
    return config
