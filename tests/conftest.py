"""Shared fixtures: a real core + façade stack on port 0, running in a background thread."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.engine.blas import preload_blas

preload_blas()  # before the first `import mlx` of the session

from tests.support.random_model import build_random_model  # noqa: E402
from tests.support.random_vlm import MEDIA_LIMITS, build_random_vlm  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402
from tests.support.stack import Stack  # noqa: E402

TEST_MODEL = Path(os.environ.get("MLX_RESPONSES_TEST_MODEL", str(BUNDLED_MODEL)))
# MLX_RESPONSES_TEST_STORE=redis runs every stack (the whole HTTP suite) on a real redis-server.
TEST_STORE = os.environ.get("MLX_RESPONSES_TEST_STORE", "memory")


@pytest.fixture(scope="session", autouse=True)
def prompt_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The prompt cache's disk tier of every server the tests start (`serve` and `core`
    processes fill in the user's cache folder by default): a folder of the session's, never
    the real one. Stacks built in process have no disk tier unless a test gives one."""
    folder = tmp_path_factory.mktemp("prompt-cache")
    before = os.environ.get("MLX_RESPONSES_PROMPT_CACHE_DIR")
    os.environ["MLX_RESPONSES_PROMPT_CACHE_DIR"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("MLX_RESPONSES_PROMPT_CACHE_DIR", None)
    else:
        os.environ["MLX_RESPONSES_PROMPT_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def model_path() -> Path:
    return TEST_MODEL


@pytest.fixture(scope="session")
def store_url(request: pytest.FixtureRequest) -> str:
    """The `--store` of the test stacks: memory, or the session's redis-server."""
    if TEST_STORE == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return server.url(3)
    return "memory"


@pytest.fixture(scope="session")
def stack(model_path: Path, store_url: str) -> Iterator[Stack]:
    """The default stack (seed defaults), shared by the tests that don't change settings."""
    with Stack.running(model_path=model_path, store_url=store_url) as s:
        yield s


@pytest.fixture(scope="session", params=["memory", "redis"])
def each_store_stack(request: pytest.FixtureRequest, model_path: Path) -> Iterator[Stack]:
    """The default stack once on the memory store and once on a real redis-server."""
    url = "memory"
    if request.param == "redis":
        url = request.getfixturevalue("redis_server").url(4)
    with Stack.running(model_path=model_path, store_url=url) as s:
        yield s


@pytest.fixture
def make_stack(model_path: Path, store_url: str) -> Iterator[object]:
    """Starts stacks with custom settings; stops them after the test."""
    started: list[Stack] = []

    def factory(model: Path | None = None, **overrides: object) -> Stack:
        overrides.setdefault("store_url", store_url)
        s = Stack(model_path=model or model_path, **overrides)
        s.start()
        started.append(s)
        return s

    yield factory
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def short_context_model(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """The test model's weights declaring a 2,048-token context and no sliding window (which
    would never slide within it): the rows it was trained on.

    Compaction keeps a sixteenth of the context by default (the seed's keep_tokens), so the
    short histories the compaction tests build have something older than that to summarise; and
    `--engine slots` and speculation need plain KV caches.
    """
    out = tmp_path_factory.mktemp("short-context") / model_path.name
    shutil.copytree(model_path, out)
    config = json.loads((out / "config.json").read_text())
    config["max_position_embeddings"] = 2048
    config["use_sliding_window"] = False
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


@pytest.fixture(scope="session")
def short_context_stack(short_context_model: Path, store_url: str) -> Iterator[Stack]:
    with Stack.running(model_path=short_context_model, store_url=store_url) as s:
        yield s


@pytest.fixture(scope="session")
def random_model(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A random-weight model with the test model's tokenizer: it generates until told to stop."""
    return build_random_model(
        tmp_path_factory.mktemp("random") / "random-chat", seed=3, tokenizer_from=model_path
    )


@pytest.fixture(scope="session")
def random_stack(random_model: Path, store_url: str) -> Iterator[Stack]:
    """A stack on the random model, for long generations (cancel, disconnect, batching)."""
    with Stack.running(model_path=random_model, store_url=store_url) as s:
        yield s


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server on a free port (skips only when the binary is missing)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(
            "redis-server is not installed (`make setup` installs the Debian package "
            "redis-server when it runs as root with apt-get)"
        )
    server = RedisServer(binary, tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def vlm_stack(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[Stack]:
    """A stack on a tiny random Qwen2-VL (built per module), with small media limits."""
    folder = build_random_vlm(tmp_path_factory.mktemp("tiny-vlm") / "tiny-vlm")
    with Stack.running(model_path=folder, store_url=store_url, **MEDIA_LIMITS) as s:
        yield s
