"""POST /v1/embeddings against the bundled tiny embedding model, served beside the chat model:
the OpenAI SDK (floats and base64), LangChain and LlamaIndex, retrieval, batching, errors, the
gRPC method and the model's lifecycle."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from openai import BadRequestError, OpenAI

from mlx_responses.v1 import embeddings_service_pb2 as em
from mlx_responses_client import Client
from tests.http.test_models import metric
from tests.support.stack import Stack
from training.tiny_embed.corpus import held_out

TINY_EMBED = BUNDLED_MODEL.parent / "tiny-embed"
EMBED = "tiny-embed"  # its folder name
# LlamaIndex's OpenAIEmbedding takes only OpenAI's model names: the stack serves the model under
# one (--model-alias), as a user pointing LlamaIndex at us would.
ALIAS = "text-embedding-3-small"
CHAT = BUNDLED_MODEL.name
WIDTH = 64


@pytest.fixture(scope="module")
def stack(store_url: str) -> Iterator[Stack]:
    with Stack.running(
        model_path=BUNDLED_MODEL,
        models=(BUNDLED_MODEL, TINY_EMBED),
        model_aliases=(CHAT, ALIAS),
        store_url=store_url,
    ) as s:
        yield s


@pytest.fixture(scope="module")
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.base_url}/v1", api_key="sk-none", max_retries=0)


def vectors(client: OpenAI, texts: list[str], **extra: Any) -> np.ndarray:
    reply = client.embeddings.create(model=EMBED, input=texts, encoding_format="float", **extra)
    assert [d.index for d in reply.data] == list(range(len(texts)))
    return np.array([d.embedding for d in reply.data], dtype=np.float32)


def post(stack: Stack, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{stack.base_url}/v1/embeddings", json=body, timeout=60)


def test_floats_and_base64_decode_to_the_same_vectors(stack: Stack, client: OpenAI) -> None:
    texts = ["Vorlan exports copper to its neighbours.", "Which city governs Vorlan?"]
    reply = client.embeddings.create(model=EMBED, input=texts, encoding_format="float")
    assert reply.object == "list" and reply.model == ALIAS
    assert [(d.object, d.index) for d in reply.data] == [("embedding", 0), ("embedding", 1)]
    floats = np.array([d.embedding for d in reply.data], dtype=np.float32)
    assert floats.shape == (2, WIDTH)
    np.testing.assert_allclose(np.linalg.norm(floats, axis=1), 1.0, rtol=1e-5)
    assert reply.usage.prompt_tokens == reply.usage.total_tokens > 2
    raw = post(stack, {"model": EMBED, "input": texts, "encoding_format": "base64"}).json()
    decoded = np.array(
        [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in raw["data"]]
    )
    assert np.array_equal(decoded, floats)  # bit for bit
    # The SDK's default asks for base64 and decodes it itself.
    default = client.embeddings.create(model=EMBED, input=texts)
    assert np.array_equal(np.array([d.embedding for d in default.data], dtype=np.float32), floats)
    assert raw["usage"] == {
        "prompt_tokens": reply.usage.prompt_tokens,
        "total_tokens": reply.usage.total_tokens,
    }


@pytest.mark.parametrize("dimensions", [WIDTH, 32, 16])
def test_a_question_ranks_its_own_passage_first(client: OpenAI, dimensions: int) -> None:
    # Countries never seen in training, eight facts each: every passage of a country names
    # it, so only the question's meaning tells its passage from its seven siblings.
    pairs = held_out(count=6)
    questions = vectors(client, [p.question for p in pairs], dimensions=dimensions)
    passages = vectors(client, [p.passage for p in pairs], dimensions=dimensions)
    assert questions.shape == (len(pairs), dimensions)
    np.testing.assert_allclose(np.linalg.norm(questions, axis=1), 1.0, rtol=1e-5)
    best = np.argmax(questions @ passages.T, axis=1)
    wrong = [(pairs[i].question, pairs[b].passage) for i, b in enumerate(best) if b != i]
    assert wrong == []


def test_a_batch_embeds_as_each_input_alone(client: OpenAI) -> None:
    pairs = held_out(count=8)
    texts = [p.passage if i % 2 else p.question for i, p in enumerate(pairs)][:64]
    together = vectors(client, texts)
    alone = np.concatenate([vectors(client, [t]) for t in texts[:6]])
    np.testing.assert_allclose(together[:6], alone, atol=2e-5)


def test_token_ids_embed_as_their_text(stack: Stack, client: OpenAI) -> None:
    runtime = stack.core.models.models[ALIAS].runtime if stack.core else None
    assert runtime is not None
    tokenizer = runtime.loaded.tokenizer._tokenizer
    texts = ["Which creature stands for Kesmar?", "The lynx appears on the flag of Kesmar."]
    ids = [list(tokenizer(t)["input_ids"]) for t in texts]
    by_text = vectors(client, texts)
    reply = client.embeddings.create(model=EMBED, input=ids, encoding_format="float")
    np.testing.assert_allclose([d.embedding for d in reply.data], by_text, atol=1e-6)
    one = client.embeddings.create(model=EMBED, input=ids[0], encoding_format="float")
    np.testing.assert_allclose(one.data[0].embedding, by_text[0], atol=1e-6)
    assert one.usage.prompt_tokens == len(ids[0])


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        ({"model": EMBED, "input": ""}, 400, "input", "invalid_value"),
        ({"model": EMBED, "input": [[1, 2], [99999]]}, 400, "input", "invalid_value"),
        ({"model": EMBED, "input": "word " * 80}, 400, "input", "context_length_exceeded"),
        ({"model": EMBED, "input": "x", "dimensions": 8}, 400, "dimensions", "invalid_value"),
        ({"model": EMBED, "input": "x", "dimensions": 65}, 400, "dimensions", "invalid_value"),
        ({"model": EMBED, "input": "x", "encoding_format": "hex"},
         400, "encoding_format", "invalid_value"),
        ({"model": CHAT, "input": "x"}, 400, "model", "model_not_supported"),
        ({"model": "no-such-model", "input": "x"}, 404, "model", "model_not_found"),
    ],
)  # fmt: skip
def test_bad_requests_are_openai_shaped(
    stack: Stack, body: dict[str, Any], status: int, param: str, code: str
) -> None:
    reply = post(stack, body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert (error["param"], error["code"]) == (param, code)
    expected = "invalid_request_error"
    assert error["type"] == expected and error["message"]


def test_a_generation_request_to_the_embedding_model_is_a_400(stack: Stack, client: OpenAI) -> None:
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(model=EMBED, input="hello")
    assert "embedding model" in caught.value.message
    with pytest.raises(BadRequestError):
        client.chat.completions.create(model=EMBED, messages=[{"role": "user", "content": "hi"}])


def test_langchain_openai_embeddings(stack: Stack, client: OpenAI) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    # check_embedding_ctx_length=False: LangChain sends the texts (by default it tokenizes
    # them with tiktoken's cl100k, OpenAI's vocabulary, which is not the model's).
    lc = langchain_openai.OpenAIEmbeddings(
        model=EMBED,
        base_url=f"{stack.base_url}/v1",
        api_key="sk-none",
        check_embedding_ctx_length=False,
    )
    texts = ["Which stream crosses Vorlan?", "The river foss flows through Vorlan."]
    expected = vectors(client, texts)
    np.testing.assert_allclose(lc.embed_documents(texts), expected, atol=1e-6)
    np.testing.assert_allclose(lc.embed_query(texts[0]), expected[0], atol=1e-6)


def test_llamaindex_openai_embedding(stack: Stack, client: OpenAI) -> None:
    openai_embedding = pytest.importorskip("llama_index.embeddings.openai")
    li = openai_embedding.OpenAIEmbedding(
        model_name=ALIAS, api_base=f"{stack.base_url}/v1", api_key="sk-none"
    )
    texts = ["What do people eat in Vorlan?", "Cooks in Vorlan make stew from lentil."]
    expected = vectors(client, texts)
    np.testing.assert_allclose(li.get_text_embedding_batch(texts), expected, atol=1e-6)
    np.testing.assert_allclose(li.get_query_embedding(texts[0]), expected[0], atol=1e-6)


def test_grpc_create_embeddings(stack: Stack, client: OpenAI) -> None:
    assert stack.server is not None
    texts = ["How old is Vorlan?", "Vorlan was founded in the year 1204."]
    with Client.connect(f"127.0.0.1:{stack.server.port}") as rpc:
        reply = rpc.embed(
            em.CreateEmbeddingsRequest(
                model=EMBED,
                inputs=[em.EmbeddingInput(text=texts[0]), em.EmbeddingInput(text=texts[1])],
                dimensions=32,
            )
        )
        assert reply.model == ALIAS
        assert [d.index for d in reply.data] == [0, 1]
        got = np.array([list(d.values) for d in reply.data], dtype=np.float32)
        assert np.array_equal(got, vectors(client, texts, dimensions=32))
        assert reply.usage.prompt_tokens == reply.usage.total_tokens > 0
        with pytest.raises(grpc.RpcError) as caught:
            rpc.embed(em.CreateEmbeddingsRequest(model=EMBED))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_embedding_model_keeps_the_lifecycle(stack: Stack, client: OpenAI) -> None:
    """Listed, loaded on demand, in the memory budget, unloaded past its keep_alive."""
    assert stack.core is not None
    listed = {m.id: m for m in client.models.list().data}
    assert {CHAT, ALIAS} <= set(listed)
    vectors(client, ["warm"])  # loaded (by an earlier test or now)
    budget = stack.core.models.memory
    assert budget is not None
    weights = (TINY_EMBED / "model.safetensors").stat().st_size
    held = budget.by_model()[ALIAS]["weights"]
    assert 0.9 * weights <= held <= weights
    before = metric(stack, "mlx_responses_model_loads_total", model_name=ALIAS, reason="request")
    unloads = "mlx_responses_model_unloads_total"
    gone = metric(stack, unloads, model_name=ALIAS, reason="keep_alive")
    # keep_alive 0.2 s: idle past it, the model unloads; the next request loads it again.
    reply = post(stack, {"model": EMBED, "input": "bye", "keep_alive": 0.2})
    assert reply.status_code == 200, reply.text
    deadline = time.monotonic() + 30
    # The unload is counted once it is done (its thread ended, its memory account closed).
    while metric(stack, unloads, model_name=ALIAS, reason="keep_alive") == gone:
        assert time.monotonic() < deadline, "never unloaded"
        time.sleep(0.05)
    assert stack.core.models.models[ALIAS].runtime is None
    assert ALIAS not in budget.by_model()
    again = vectors(client, ["back"], extra_body={"keep_alive": -1})
    assert again.shape == (1, WIDTH)
    loads = metric(stack, "mlx_responses_model_loads_total", model_name=ALIAS, reason="request")
    assert loads == before + 1


def test_the_model_folder_is_detected_as_an_embedding_model() -> None:
    from mlx_responses.service.models.embedding_config import embedding_folder

    assert embedding_folder(TINY_EMBED)
    assert not embedding_folder(BUNDLED_MODEL)
