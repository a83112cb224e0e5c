"""Serving benchmark: our HTTP SSE server vs. mlx-lm in process and mlx_lm.server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO / ".bench"
BIN = Path(sys.executable).parent
BUILD_VERSION = 2  # bump when the way models are built changes, so cached folders are rebuilt
FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
NICE_TOKEN = re.compile(r"^ ?[A-Za-z]+$")
HTTP_TIMEOUT = httpx.Timeout(600.0, connect=10.0)

TARGETS = {
    "decode_ratio": (">=", 0.95),
    "batch8_vs_batchgen": (">=", 0.9),
    "batch8_vs_mlx_lm": (">=", 1.3),
    "batch8_vs_batch1": (">=", 2.5),
    "cached_ttft_ratio": ("<=", 0.3),
    "spec_vs_mlx_lm": (">=", 1.8),
    "spec_vs_nospec": (">=", 1.0),
    "spec_plain_vs_nospec": (">=", 0.97),
    "rss_ratio_vs_mlx_lm": ("<=", 1.0),
}


# --- model ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """The random model's architecture."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    context: int


def shape_from_args(args: argparse.Namespace) -> Shape:
    """Qwen3-like proportions: head_dim 64 (or less for tiny models), GQA 3:1, MLP ≈ 8/3·hidden."""
    heads = max(2, args.hidden // 64)
    while args.hidden % heads:
        heads -= 1
    kv_heads = max(1, heads // 3)
    while heads % kv_heads:
        kv_heads -= 1
    intermediate = args.intermediate or max(64, round(args.hidden * 8 / 3 / 64) * 64)
    return Shape(args.hidden, args.layers, intermediate, heads, kv_heads, args.context)


def _tokenizer_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        path = folder / name
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def banned_token_ids(tokenizer: Any) -> list[int]:
    """Tokens the random model must never emit: EOS, specials, markers, non-word pieces.

    Random weights emit whatever their argmax is; a vocabulary as small as a test tokenizer's
    would reach EOS (or `<think>`, `<tool_call>`, a stray UTF-8 byte) within a few hundred steps,
    and contenders would then stop at different points. `build_random_model(never_emit=...)`
    gives them a hugely negative logit, so decoding always runs to max_tokens and streams plain
    words.
    """
    vocab_size = len(tokenizer.get_vocab())
    banned = set(tokenizer.eos_token_ids) | set(getattr(tokenizer, "all_special_ids", []))
    for token_id in range(vocab_size):
        if not NICE_TOKEN.match(tokenizer.decode([token_id])):
            banned.add(token_id)
    return sorted(banned)


def build_model(shape: Shape, tokenizer_from: Path, seed: int) -> Path:
    """The cached model folder for `shape` (built on first use under .bench/)."""
    key = (
        f"qwen3-h{shape.hidden}-l{shape.layers}-i{shape.intermediate}-a{shape.heads}"
        f"-kv{shape.kv_heads}-c{shape.context}-s{seed}-t{_tokenizer_digest(tokenizer_from)}"
    )
    folder = CACHE_DIR / key
    marker = folder / "bench.json"
    if marker.is_file() and json.loads(marker.read_text()).get("version") == BUILD_VERSION:
        print(f"model: reusing {folder}")
        return folder
    if not (tokenizer_from / "tokenizer.json").is_file():
        raise SystemExit(f"--tokenizer-from {tokenizer_from} has no tokenizer.json")
    print(f"model: building {folder} ...", flush=True)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import mlx.core as mx
    from mlx_lm.utils import load_tokenizer

    from tests.support.random_model import build_random_model

    tokenizer = load_tokenizer(tokenizer_from)
    banned = banned_token_ids(tokenizer)
    allowed = len(tokenizer.get_vocab()) - len(banned)
    if allowed < 16:
        raise SystemExit(f"the tokenizer has only {allowed} plain-word tokens; need >= 16")
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    build_random_model(
        tmp,
        hidden_size=shape.hidden,
        layers=shape.layers,
        intermediate_size=shape.intermediate,
        heads=shape.heads,
        kv_heads=shape.kv_heads,
        context=shape.context,
        seed=seed,
        tokenizer_from=tokenizer_from,
        never_emit=banned,
    )
    n_params = sum(v.size for v in mx.load(str(tmp / "model.safetensors")).values())
    (tmp / "bench.json").write_text(
        json.dumps(
            {
                "version": BUILD_VERSION,
                "shape": shape.__dict__,
                "parameters": n_params,
                "banned_tokens": len(banned),
            }
        )
    )
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


def build_draft(folder: Path, layers: int) -> Path:
    """The bench model cut to its first `layers` layers (same embeddings), as a model folder:
    a draft model of the same tokenizer for `--speculative draft`."""
    import mlx.core as mx

    out = folder.with_name(f"{folder.name}-draft{layers}")
    if (out / "model.safetensors").is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(folder, tmp)
    config = json.loads((tmp / "config.json").read_text())
    config["num_hidden_layers"] = layers
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    weights = mx.load(str(folder / "model.safetensors"))
    assert isinstance(weights, dict)
    kept = {
        k: v
        for k, v in weights.items()
        if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers
    }
    mx.save_safetensors(str(tmp / "model.safetensors"), kept)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


# --- prompts -------------------------------------------------------------------------------
class Prompts:
    """Plain-word prompts of chosen token lengths, and their chat-template rendering."""

    def __init__(self, tokenizer: Any, seed: int) -> None:
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)
        words = {tokenizer.decode([i]).strip() for i in range(len(tokenizer.get_vocab()))} - {""}
        self.words = sorted(w for w in words if NICE_TOKEN.match(w))
        self.template_overhead = len(self.render(""))

    def text(self, n_tokens: int) -> str:
        """Random words, cut to about `n_tokens` tokens; every call differs from the last."""
        parts = [f"run{self.rng.randrange(1 << 30)}"]
        for _ in range(1000):
            parts += self.rng.choices(self.words, k=max(8, n_tokens // 2))
            ids = self.tokenizer.encode(" ".join(parts), add_special_tokens=False)
            if len(ids) >= n_tokens:
                return str(self.tokenizer.decode(ids[:n_tokens])).strip()
        raise RuntimeError(f"could not build a {n_tokens}-token prompt")

    def file_task(self, n_tokens: int) -> str:
        """The agent-like repetitive task: a long "file" in context and a request to copy it."""
        lines = [self.text(12) for _ in range(max(1, n_tokens // 12))]
        return "Here is a file:\n" + "\n".join(lines) + "\nCopy the file exactly:\n"

    def render(self, text: str) -> list[int]:
        """Token ids of a one-user-message chat prompt, as our server renders it."""
        rendered = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
        return list(self.tokenizer.encode(rendered, add_special_tokens=False))


# --- processes -----------------------------------------------------------------------------
def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server_process(
    name: str, argv: Sequence[str], env: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """Runs a server with its output in .bench/logs/<name>.log; always terminates it."""
    logs = CACHE_DIR / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"{name}.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


def _check_alive(proc: subprocess.Popen[bytes], name: str) -> None:
    if proc.poll() is not None:
        log = CACHE_DIR / "logs" / f"{name}.log"
        tail = log.read_text(errors="replace")[-3000:] if log.is_file() else ""
        raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")


def wait_ours(proc: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    """Until /health answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _check_alive(proc, "ours")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError("our server never became healthy")


def wait_mlx_lm(proc: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    """Until a one-token chat completion succeeds."""
    deadline = time.monotonic() + timeout
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    while time.monotonic() < deadline:
        _check_alive(proc, "mlx_lm")
        with contextlib.suppress(httpx.HTTPError):
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            if httpx.post(url, json=body, timeout=30).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError("mlx_lm.server never answered")


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo and len(found) < 1000:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _stat_cpu(stat_path: Path) -> float:
    fields = stat_path.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its descendants, all threads."""
    total = 0.0
    for p in _descendants(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += _stat_cpu(Path(f"/proc/{p}/stat"))
    return total


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds per thread id of `pid`."""
    out: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):
                out[int(task.name)] = _stat_cpu(task / "stat")
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Python thread names by OS thread id (from `py-spy dump`); others (MLX, BLAS) as native."""
    names: dict[int, str] = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                names[int(task.name)] = f"native: {(task / 'comm').read_text().strip()}"
    py_spy = shutil.which("py-spy", path=str(BIN)) or shutil.which("py-spy")
    if py_spy is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            dump = subprocess.run(
                [py_spy, "dump", "--pid", str(pid)],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout
            for m in re.finditer(r"^Thread (0x[0-9A-Fa-f]+|\d+) \(\w+\): \"([^\"]*)\"", dump, re.M):
                tid = int(m.group(1), 0)
                if tid in names:
                    names[tid] = m.group(2)
    return names


def peak_rss_mb(pid: int) -> float:
    """VmHWM (peak resident set) of `pid` and its descendants, in MiB."""
    total_kb = 0
    for p in _descendants(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total_kb += int(line.split()[1])
    return total_kb / 1024


# --- clients -------------------------------------------------------------------------------
@dataclass
class StreamResult:
    """Timings and counts of one streamed request."""

    sent: float
    first: float | None = None
    last: float | None = None
    done: float = 0.0
    tokens: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    response_id: str = ""

    @property
    def ttft(self) -> float:
        return (self.first if self.first is not None else self.done) - self.sent

    @property
    def decode_tps(self) -> float:
        """Tokens per second between the first and last streamed token (tokens - 1 gaps)."""
        if self.first is None or self.last is None or self.last <= self.first:
            return 0.0
        return (self.tokens - 1) / (self.last - self.first)


async def stream_ours(client: httpx.AsyncClient, base: str, body: dict[str, Any]) -> StreamResult:
    """POST /v1/responses with stream: true, timing delta events."""
    result = StreamResult(sent=time.perf_counter())
    event = ""
    async with client.stream("POST", f"{base}/v1/responses", json=body) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"ours answered {resp.status_code}: {(await resp.aread())[:500]!r}")
        async for line in resp.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
                if event.endswith(".delta"):
                    now = time.perf_counter()
                    result.last = now
                    if result.first is None:
                        result.first = now
            elif line.startswith("data: ") and event in FINAL_EVENTS:
                response = json.loads(line[6:])["response"]
                if event == "response.failed":
                    raise RuntimeError(f"response failed: {response.get('error')}")
                usage = response["usage"]
                result.tokens = int(usage["output_tokens"])
                result.input_tokens = int(usage["input_tokens"])
                result.cached_tokens = int(usage["input_tokens_details"]["cached_tokens"])
                result.response_id = response["id"]
    result.done = time.perf_counter()
    return result


async def stream_mlx_lm(client: httpx.AsyncClient, base: str, body: dict[str, Any]) -> StreamResult:
    """POST /v1/chat/completions with stream: true; tokens from the usage chunk."""
    result = StreamResult(sent=time.perf_counter())
    async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"mlx_lm answered {resp.status_code}")
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data.strip() == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                result.tokens = int(chunk["usage"]["completion_tokens"])
                result.input_tokens = int(chunk["usage"]["prompt_tokens"])
            for choice in chunk.get("choices", []):
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("reasoning"):
                    now = time.perf_counter()
                    result.last = now
                    if result.first is None:
                        result.first = now
    result.done = time.perf_counter()
    return result


def ours_body(alias: str, text: str, tokens: int, **extra: Any) -> dict[str, Any]:
    """A streamed, greedy /v1/responses request."""
    return {
        "model": alias,
        "input": text,
        "stream": True,
        "max_output_tokens": tokens,
        "temperature": 0,
        **extra,
    }


def mlx_lm_body(text: str, tokens: int) -> dict[str, Any]:
    """A streamed, greedy chat completion that reports usage."""
    return {
        "messages": [{"role": "user", "content": text}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": tokens,
        "temperature": 0,
    }


@dataclass
class Concurrent:
    """N streams started together."""

    tokens: list[int]
    wall: float
    ttfts: list[float]
    server_cpu: float = 0.0  # CPU seconds the server (or, in process, this process) used
    client_cpu: float = 0.0  # CPU seconds this process spent as the HTTP client
    decode_window: float = 0.0  # first token of any stream to the last token of any

    @property
    def tps(self) -> float:
        return sum(self.tokens) / self.wall

    @property
    def decode_tps(self) -> float:
        """Aggregate tokens/s once streams decode (prefill excluded)."""
        n = sum(max(0, t - 1) for t in self.tokens)
        return n / self.decode_window if self.decode_window > 0 else float("nan")

    def cpu_ms_per_token(self, cpu: float) -> float:
        return cpu / max(1, sum(self.tokens)) * 1e3


async def run_concurrent(
    kind: str, base: str, bodies: list[dict[str, Any]], timeout: float, pid: int
) -> Concurrent:
    """All bodies at once; wall time from the first request sent to the last stream done."""
    fn = stream_ours if kind == "ours" else stream_mlx_lm
    limits = httpx.Limits(max_connections=len(bodies) + 2)
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT, limits=limits) as client:
        server_cpu, client_cpu = cpu_seconds(pid), time.process_time()
        start = time.perf_counter()
        results = await asyncio.wait_for(
            asyncio.gather(*(fn(client, base, b) for b in bodies)), timeout
        )
        server_cpu, client_cpu = cpu_seconds(pid) - server_cpu, time.process_time() - client_cpu
    wall = max(r.done for r in results) - start
    firsts = [r.first for r in results if r.first is not None]
    lasts = [r.last for r in results if r.last is not None]
    window = max(lasts) - min(firsts) if firsts and lasts else 0.0
    return Concurrent(
        [r.tokens for r in results], wall, [r.ttft for r in results], server_cpu, client_cpu, window
    )


def one_stream(kind: str, base: str, body: dict[str, Any], timeout: float) -> StreamResult:
    """A single streamed request."""

    async def go() -> StreamResult:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
            fn = stream_ours if kind == "ours" else stream_mlx_lm
            return await asyncio.wait_for(fn(client, base, body), timeout)

    return asyncio.run(go())


# --- in-process contenders -----------------------------------------------------------------
def stream_generate_decode(
    model: Any, tokenizer: Any, prompt: list[int], tokens: int
) -> StreamResult:
    """mlx_lm.stream_generate, greedy, timing first token to last."""
    import mlx.core as mx
    from mlx_lm import stream_generate

    result = StreamResult(sent=time.perf_counter())
    count = 0
    for _ in stream_generate(model, tokenizer, mx.array(prompt), max_tokens=tokens):
        now = time.perf_counter()
        count += 1
        result.last = now
        if result.first is None:
            result.first = now
    result.tokens = count
    result.done = time.perf_counter()
    return result


def batch_generator_run(
    model: Any, eos: Sequence[int], prompts: list[list[int]], tokens: int, max_batch: int
) -> Concurrent:
    """BatchGenerator configured like our worker: insert all, next() until every one is done."""
    from mlx_lm.generate import BatchGenerator

    generator = BatchGenerator(
        model,
        stop_tokens=[[t] for t in sorted(eos)],
        completion_batch_size=max_batch,
        prefill_batch_size=min(8, max_batch),
        prefill_step_size=512,
    )
    try:
        cpu = time.process_time()
        start = time.perf_counter()
        uids = generator.insert(prompts, max_tokens=[tokens] * len(prompts))
        counts = dict.fromkeys(uids, 0)
        first: dict[int, float] = {}
        pending = set(uids)
        for _ in range((tokens + 4) * (len(prompts) + 4) * 4):
            if not pending:
                break
            _, responses = generator.next()
            now = time.perf_counter()
            for r in responses:
                counts[r.uid] += 1
                first.setdefault(r.uid, now)
                if r.finish_reason is not None:
                    pending.discard(r.uid)
        if pending:
            raise RuntimeError("BatchGenerator did not finish within its step bound")
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    finally:
        generator.close()
    return Concurrent([counts[u] for u in uids], wall, [first[u] - start for u in uids], cpu)


# --- reporting -----------------------------------------------------------------------------
@dataclass
class Figures:
    """Samples per metric, and token-count mismatches found on the way."""

    samples: dict[str, list[float]] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)

    def add(self, name: str, value: float) -> None:
        self.samples.setdefault(name, []).append(value)

    def median(self, name: str) -> float:
        values = self.samples.get(name, [])
        return statistics.median(values) if values else float("nan")

    def check(self, who: str, counts: Sequence[int], expected: int) -> None:
        bad = [c for c in counts if c != expected]
        if bad:
            self.mismatches.append(f"{who}: counted {sorted(set(counts))}, expected {expected}")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[rank]


def ratio(a: float, b: float) -> float:
    """a / b, NaN when b is not positive."""
    return a / b if b > 0 else float("nan")


def verdict(name: str, value: float) -> str:
    """'ok' or 'MISS' against the target of `name`."""
    op, target = TARGETS[name]
    good = value >= target if op == ">=" else value <= target
    return f"{op} {target:<4} {'ok' if good else 'MISS'}"


def thread_report(cpu: dict[int, float], names: dict[int, str], tokens: int) -> list[str]:
    """Lines of our server's CPU per thread during the widest-batch runs (ms per token)."""
    total = sum(cpu.values())
    lines = []
    for tid, seconds in sorted(cpu.items(), key=lambda kv: -kv[1])[:8]:
        if seconds <= 0:
            continue
        lines.append(
            f"  {names.get(tid, '?')[:28]:<28} tid {tid:<8}{seconds / max(1, tokens) * 1e3:>8.2f}"
            f"  ({seconds / total * 100 if total else 0:.0f}%)"
        )
    return lines


def print_report(
    fig: Figures,
    args: argparse.Namespace,
    peak_ours: float,
    peak_mlx: float,
    threads: Sequence[str] = (),
    *,
    peak_spec: float = float("nan"),
) -> str:
    """The table, then the one-line summary (returned)."""
    m = fig.median
    print()
    print(f"{'metric':<44}{'median':>12}")
    print("-" * 56)
    rows = [
        ("decode tok/s, ours (1 stream, HTTP SSE)", m("decode.ours")),
        ("decode tok/s, mlx_lm.stream_generate", m("decode.stream_generate")),
    ]
    for n in args.streams:
        rows += [
            (f"aggregate tok/s @{n}, ours", m(f"agg.ours.{n}")),
            (f"aggregate tok/s @{n}, BatchGenerator", m(f"agg.batchgen.{n}")),
            (f"aggregate tok/s @{n}, mlx_lm.server", m(f"agg.mlx_lm.{n}")),
        ]
    rows += [
        ("decode tok/s @1, spec server, plain prompt", m("decode.spec")),
        ("decode tok/s @1, draft server, plain prompt", m("decode.draft")),
        ("repetitive @1 decode tok/s, ours", m("rep.ours.1")),
        ("repetitive @1 decode tok/s, spec server", m("rep.spec.1")),
        ("repetitive @1 decode tok/s, ours --kv-bits 8", m("rep.kv8.1")),
        ("repetitive @1 decode tok/s, draft server", m("rep.draft.1")),
        ("repetitive @1 decode tok/s, mlx_lm.server", m("rep.mlx_lm.1")),
        (f"repetitive @{max(args.streams)} decode tok/s, ours", m("rep.ours.top")),
        (f"repetitive @{max(args.streams)} decode tok/s, spec server", m("rep.spec.top")),
        (f"repetitive @{max(args.streams)} decode tok/s, --kv-bits 8", m("rep.kv8.top")),
        (f"repetitive @{max(args.streams)} decode tok/s, draft server", m("rep.draft.top")),
        (f"repetitive @{max(args.streams)} decode tok/s, mlx_lm", m("rep.mlx_lm.top")),
        (f"plain @{max(args.streams)} tok/s, spec server", m(f"agg.spec.{max(args.streams)}")),
        (f"plain @{max(args.streams)} tok/s, ours --kv-bits 8", m(f"agg.kv8.{max(args.streams)}")),
    ]
    for label, value in rows:
        print(f"{label:<44}{value:>12.1f}")
    for n in (1, max(args.streams)):
        samples = fig.samples.get(f"ttft.ours.{n}", [])
        print(
            f"{f'TTFT ms @{n}, ours (p50 / p95, {len(samples)} samples)':<44}"
            f"{percentile(samples, 50) * 1e3:>8.0f} / {percentile(samples, 95) * 1e3:.0f}"
        )
    print(f"{'TTFT ms, cold turn of the same length':<44}{m('ttft.cold') * 1e3:>12.0f}")
    print(f"{'TTFT ms, 2nd turn (previous_response_id)':<44}{m('ttft.second') * 1e3:>12.0f}")
    print(
        f"{'  its input tokens / cached tokens':<44}{m('second.input'):>8.0f} / "
        f"{m('second.cached'):.0f}"
    )
    print(f"{'  cold turn input tokens':<44}{m('cold.input'):>12.0f}")
    for n in args.streams:
        print(
            f"{f'CPU ms/token @{n}: ours / BatchGen / mlx_lm':<44}"
            f"{m(f'cpu.ours.{n}'):>6.2f} / {m(f'cpu.batchgen.{n}'):.2f} / "
            f"{m(f'cpu.mlx_lm.{n}'):.2f}   (client: ours {m(f'cpu.client.ours.{n}'):.2f}, "
            f"mlx_lm {m(f'cpu.client.mlx_lm.{n}'):.2f})"
        )
    if threads:
        print(f"our server's CPU ms/token by thread @{max(args.streams)}:")
        for line in threads:
            print(line)
    print(f"{'peak RSS MB, ours (VmHWM, with children)':<44}{peak_ours:>12.0f}")
    print(f"{'peak RSS MB, mlx_lm.server':<44}{peak_mlx:>12.0f}")
    print(f"{'peak RSS MB, ours --kv-bits 8':<44}{peak_spec:>12.0f}")
    top = max(args.streams)
    ttft_top = fig.samples.get(f"ttft.ours.{top}", [])
    values = {
        "decode_ratio": ratio(m("decode.ours"), m("decode.stream_generate")),
        "batch8_vs_mlx_lm": ratio(m(f"agg.ours.{top}"), m(f"agg.mlx_lm.{top}")),
        "spec_vs_mlx_lm": ratio(m("rep.spec.1"), m("rep.mlx_lm.1")),
        "spec_vs_nospec": ratio(m("rep.spec.1"), m("rep.ours.1")),
        "rss_ratio_vs_mlx_lm": ratio(peak_spec, peak_mlx),
        "ttft_p95_8": percentile(ttft_top, 95),
        "spec8_vs_mlx_lm": ratio(m("rep.spec.top"), m("rep.mlx_lm.top")),
        "spec_plain_vs_nospec": ratio(m("decode.spec"), m("decode.ours")),
        "batch8_vs_batch1": ratio(m(f"agg.ours.{top}"), m("agg.ours.1")),
        "batch8_vs_batchgen": ratio(m(f"agg.ours.{top}"), m(f"agg.batchgen.{top}")),
        "cached_ttft_ratio": ratio(m("ttft.second"), m("ttft.cold")),
        "draft_vs_mlx_lm": ratio(m("rep.draft.1"), m("rep.mlx_lm.1")),
        "draft_vs_nospec": ratio(m("rep.draft.1"), m("rep.ours.1")),
        "draft8_vs_nospec": ratio(m("rep.draft.top"), m("rep.ours.top")),
        "draft_plain_vs_nospec": ratio(m("decode.draft"), m("decode.ours")),
    }
    print()
    for name, value in values.items():
        target = f"   target {verdict(name, value)}" if name in TARGETS else ""
        print(f"{name:<24}{value:>8.3f}{target}")
    if fig.mismatches:
        print("\nTOKEN COUNT MISMATCHES (figures not comparable):")
        for line in fig.mismatches:
            print(f"  {line}")
    parts = " ".join(f"{k}={v:.2f}" for k, v in values.items())
    return f"bench: {parts} peak_rss_mb={round(peak_ours)}"


# --- the run -------------------------------------------------------------------------------
def load_average() -> float:
    """The 1-minute load average (NaN off Linux)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


def profile_ours(
    pid: int, out: Path, base: str, bodies: list[dict[str, Any]], timeout: float
) -> None:
    """One extra, unmeasured run of the widest batch under `py-spy record`."""
    py_spy = shutil.which("py-spy", path=str(BIN)) or shutil.which("py-spy")
    if py_spy is None:
        print("py-spy: not installed (.venv/bin/pip install py-spy); skipping the profile")
        return
    spy = subprocess.Popen(
        [
            py_spy,
            "record",
            "--pid",
            str(pid),
            "--threads",
            "--rate",
            "100",
            "--format",
            "speedscope" if out.suffix == ".json" else "flamegraph",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(1.0)
        asyncio.run(run_concurrent("ours", base, bodies, timeout, pid))
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait(10)
    print(f"py-spy: profile of ours @{len(bodies)} written to {out}")


def run(args: argparse.Namespace) -> int:
    """Builds the model, starts both servers, measures, reports."""
    from mlx_responses.service.engine.blas import preload_blas

    blas = preload_blas()  # before mlx is imported, as the console script does
    import mlx.core as mx
    from mlx_lm import load

    shape = shape_from_args(args)
    folder = build_model(shape, args.tokenizer_from.resolve(), args.seed)
    meta = json.loads((folder / "bench.json").read_text())
    draft_folder = build_draft(folder, args.draft_layers)
    if args.build_only:
        print(f"model: {folder} ({meta['parameters'] / 1e6:.1f}M parameters)")
        return 0
    model, tokenizer = load(str(folder))
    prompts = Prompts(tokenizer, args.seed)
    eos = sorted(tokenizer.eos_token_ids)
    alias = folder.name
    n_tok = args.tokens
    top = max(args.streams)
    print(
        f"shape: {shape} params={meta['parameters'] / 1e6:.1f}M fp32, tokens/request={n_tok}, "
        f"repeats={args.repeats}, BLAS={blas}, load={load_average():.2f}",
        flush=True,
    )

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    mlx_env = dict(env)
    if blas.startswith("/"):
        mlx_env["LD_PRELOAD"] = ":".join(p for p in (blas, env.get("LD_PRELOAD", "")) if p)
    port, grpc_port, mlx_port = free_port(), free_port(), free_port()
    spec_port, spec_grpc, kv_port, kv_grpc = free_port(), free_port(), free_port(), free_port()
    ours_base, mlx_base = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{mlx_port}"
    spec_base, kv_base = f"http://127.0.0.1:{spec_port}", f"http://127.0.0.1:{kv_port}"
    draft_port, draft_grpc = free_port(), free_port()
    draft_base = f"http://127.0.0.1:{draft_port}"
    fig = Figures()
    t = args.request_timeout

    def serve(http: int, grpc_at: int, *flags: str) -> list[str]:
        return [
            str(BIN / "mlx-responses"),
            "serve",
            "--model",
            str(folder),
            "--port",
            str(http),
            "--grpc-port",
            str(grpc_at),
            "--max-batch-size",
            str(args.max_batch),
            # The cold turn must be cold: a disk tier (shared by these servers, kept across
            # runs) would serve it from an earlier run's entry of the same model folder.
            "--no-prompt-cache-disk",
            *flags,
        ]

    spec_flags = ("--speculative", "ngram", "--num-draft-tokens", str(args.num_draft_tokens))
    draft_flags = (
        "--speculative",
        "draft",
        "--draft-model",
        str(draft_folder),
        "--num-draft-tokens",
        str(args.num_draft_tokens),
    )
    with (
        server_process("ours", serve(port, grpc_port), env) as ours,
        server_process("spec", serve(spec_port, spec_grpc, *spec_flags), env) as spec,
        server_process("kv8", serve(kv_port, kv_grpc, "--kv-bits", "8"), env) as kv8,
        server_process("draft", serve(draft_port, draft_grpc, *draft_flags), env) as drafted,
        server_process(
            "mlx_lm",
            [
                sys.executable,
                "-m",
                "mlx_lm.server",
                "--model",
                str(folder),
                "--port",
                str(mlx_port),
                "--host",
                "127.0.0.1",
                "--decode-concurrency",
                str(args.max_batch),
                "--prompt-concurrency",
                str(min(8, args.max_batch)),
                "--log-level",
                "WARNING",
            ],
            mlx_env,
        ) as mlx_lm,
    ):
        wait_ours(ours, port, args.startup_timeout)
        wait_mlx_lm(mlx_lm, mlx_port, args.startup_timeout)
        wait_ours(spec, spec_port, args.startup_timeout)
        wait_ours(kv8, kv_port, args.startup_timeout)
        wait_ours(drafted, draft_port, args.startup_timeout)
        print("servers: up; warming up", flush=True)
        warm = prompts.text(args.prompt_tokens)
        one_stream("ours", ours_base, ours_body(alias, warm, 8), t)
        one_stream("ours", spec_base, ours_body(alias, warm, 8), t)
        one_stream("ours", kv_base, ours_body(alias, warm, 8), t)
        one_stream("ours", draft_base, ours_body(alias, warm, 8), t)
        one_stream("mlx_lm", mlx_base, mlx_lm_body(warm, 8), t)
        stream_generate_decode(model, tokenizer, prompts.render(warm), 8)
        batch_generator_run(model, eos, [prompts.render(warm)] * 2, 8, args.max_batch)

        threads_top: dict[int, float] = {}  # our server's CPU seconds per thread, @top runs
        tokens_top = [0]
        for rep in range(args.repeats):
            # 1. one stream: our HTTP SSE vs stream_generate, the same prompt.
            text = prompts.text(args.prompt_tokens)
            r = one_stream("ours", ours_base, ours_body(alias, text, n_tok), t)
            fig.check("ours decode", [r.tokens], n_tok)
            fig.add("decode.ours", r.decode_tps)
            fig.add("ttft.ours.1", r.ttft)
            s = stream_generate_decode(model, tokenizer, prompts.render(text), n_tok)
            fig.check("stream_generate", [s.tokens], n_tok)
            fig.add("decode.stream_generate", s.decode_tps)
            r2 = one_stream("ours", spec_base, ours_body(alias, text, n_tok), t)
            fig.check("spec decode", [r2.tokens], n_tok)
            fig.add("decode.spec", r2.decode_tps)
            r3 = one_stream("ours", draft_base, ours_body(alias, text, n_tok), t)
            fig.check("draft decode", [r3.tokens], n_tok)
            fig.add("decode.draft", r3.decode_tps)
            print(
                f"[{rep}] decode tok/s ours={r.decode_tps:.1f} sg={s.decode_tps:.1f} "
                f"spec={r2.decode_tps:.1f} draft={r3.decode_tps:.1f}",
                flush=True,
            )

            # 1b. the repetitive agent-like workload: a long file in context, copy it.
            contenders = (
                ("ours", ours_base, ours.pid),
                ("spec", spec_base, spec.pid),
                ("kv8", kv_base, kv8.pid),
                ("draft", draft_base, drafted.pid),
                ("mlx_lm", mlx_base, mlx_lm.pid),
            )
            for n in [1] * args.repetitive_repeats + [top]:
                key = "1" if n == 1 else "top"
                rates = {}
                for who, base, pid in contenders:
                    tasks = [prompts.file_task(args.file_tokens) for _ in range(n)]
                    kind = "mlx_lm" if who == "mlx_lm" else "ours"
                    bodies = [
                        mlx_lm_body(x, n_tok) if who == "mlx_lm" else ours_body(alias, x, n_tok)
                        for x in tasks
                    ]
                    if n == 1:
                        one = one_stream(kind, base, bodies[0], t)
                        fig.check(f"{who} repetitive", [one.tokens], n_tok)
                        rates[who] = one.decode_tps
                    else:
                        c = asyncio.run(run_concurrent(kind, base, bodies, t, pid))
                        fig.check(f"{who} repetitive @{n}", c.tokens, n_tok)
                        rates[who] = c.decode_tps
                    fig.add(f"rep.{who}.{key}", rates[who])
                print(
                    f"[{rep}] repetitive @{n} "
                    + " ".join(f"{who}={rate:.1f}" for who, rate in rates.items()),
                    flush=True,
                )

            # 2. and 3. N concurrent streams, fresh prompts per contender.
            for n in args.streams:
                texts = [prompts.text(args.prompt_tokens) for _ in range(n)]
                before = thread_cpu(ours.pid) if n == top else {}
                c = asyncio.run(
                    run_concurrent(
                        "ours", ours_base, [ours_body(alias, x, n_tok) for x in texts], t, ours.pid
                    )
                )
                if n == top:
                    for tid, cpu in thread_cpu(ours.pid).items():
                        threads_top[tid] = threads_top.get(tid, 0.0) + cpu - before.get(tid, 0.0)
                    tokens_top[0] += sum(c.tokens)
                fig.check(f"ours @{n}", c.tokens, n_tok)
                fig.add(f"agg.ours.{n}", c.tps)
                fig.add(f"cpu.ours.{n}", c.cpu_ms_per_token(c.server_cpu))
                fig.add(f"cpu.client.ours.{n}", c.cpu_ms_per_token(c.client_cpu))
                for v in c.ttfts:
                    fig.add(f"ttft.ours.{n}", v)
                texts = [prompts.text(args.prompt_tokens) for _ in range(n)]
                b = batch_generator_run(
                    model, eos, [prompts.render(x) for x in texts], n_tok, args.max_batch
                )
                fig.check(f"BatchGenerator @{n}", b.tokens, n_tok)
                fig.add(f"agg.batchgen.{n}", b.tps)
                fig.add(f"cpu.batchgen.{n}", b.cpu_ms_per_token(b.server_cpu))
                texts = [prompts.text(args.prompt_tokens) for _ in range(n)]
                g = asyncio.run(
                    run_concurrent(
                        "mlx_lm", mlx_base, [mlx_lm_body(x, n_tok) for x in texts], t, mlx_lm.pid
                    )
                )
                fig.check(f"mlx_lm.server @{n}", g.tokens, n_tok)
                # The spec server does the same work as mlx_lm.server (for peak RSS).
                texts = [prompts.text(args.prompt_tokens) for _ in range(n)]
                sp = asyncio.run(
                    run_concurrent(
                        "ours", spec_base, [ours_body(alias, x, n_tok) for x in texts], t, spec.pid
                    )
                )
                fig.check(f"spec @{n}", sp.tokens, n_tok)
                fig.add(f"agg.spec.{n}", sp.tps)
                # ... and so does the --kv-bits 8 server, whose peak RSS is compared with it.
                texts = [prompts.text(args.prompt_tokens) for _ in range(n)]
                kv = asyncio.run(
                    run_concurrent(
                        "ours", kv_base, [ours_body(alias, x, n_tok) for x in texts], t, kv8.pid
                    )
                )
                fig.check(f"kv8 @{n}", kv.tokens, n_tok)
                fig.add(f"agg.kv8.{n}", kv.tps)
                fig.add(f"agg.mlx_lm.{n}", g.tps)
                fig.add(f"cpu.mlx_lm.{n}", g.cpu_ms_per_token(g.server_cpu))
                fig.add(f"cpu.client.mlx_lm.{n}", g.cpu_ms_per_token(g.client_cpu))
                print(
                    f"[{rep}] @{n} tok/s ours={c.tps:.1f} batchgen={b.tps:.1f} mlx_lm={g.tps:.1f}",
                    flush=True,
                )

            # 4. second turn over previous_response_id vs a cold turn of the same length.
            first = one_stream(
                "ours", ours_base, ours_body(alias, prompts.text(args.history_tokens), 8), t
            )
            second = one_stream(
                "ours",
                ours_base,
                ours_body(alias, prompts.text(16), 8, previous_response_id=first.response_id),
                t,
            )
            content = max(1, second.input_tokens - prompts.template_overhead)
            cold = one_stream("ours", ours_base, ours_body(alias, prompts.text(content), 8), t)
            fig.add("ttft.second", second.ttft)
            fig.add("ttft.cold", cold.ttft)
            fig.add("second.input", second.input_tokens)
            fig.add("second.cached", second.cached_tokens)
            fig.add("cold.input", cold.input_tokens)
            print(
                f"[{rep}] ttft ms 2nd turn={second.ttft * 1e3:.0f} "
                f"(input {second.input_tokens}, cached {second.cached_tokens}) "
                f"cold={cold.ttft * 1e3:.0f} (input {cold.input_tokens}, "
                f"cached {cold.cached_tokens})",
                flush=True,
            )

        if args.py_spy is not None:
            texts = [prompts.text(args.prompt_tokens) for _ in range(top)]
            profile_ours(
                ours.pid, args.py_spy, ours_base, [ours_body(alias, x, n_tok) for x in texts], t
            )
        names = thread_names(ours.pid)
        # 5. peak memory, read before the servers stop.
        peak_ours = peak_rss_mb(ours.pid)
        peak_mlx = peak_rss_mb(mlx_lm.pid)
        peak_spec = peak_rss_mb(kv8.pid)
        _check_alive(ours, "ours")
        _check_alive(spec, "spec")
        _check_alive(kv8, "kv8")
        _check_alive(drafted, "draft")

    del model
    mx.clear_cache()
    print(f"load average at the end: {load_average():.2f}")
    print(
        print_report(
            fig,
            args,
            peak_ours,
            peak_mlx,
            thread_report(threads_top, names, tokens_top[0]),
            peak_spec=peak_spec,
        )
    )
    return 1 if fig.mismatches else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    from mlx_responses.service.config import BUNDLED_MODEL

    parser = argparse.ArgumentParser(
        description="Benchmarks mlx-responses against mlx-lm (in process and mlx_lm.server) on "
        "a random-weight qwen3 model built under .bench/ (reused when the shape exists).",
    )
    parser.add_argument("--hidden", type=int, default=768, help="hidden size (default 768)")
    parser.add_argument("--layers", type=int, default=12, help="decoder layers (default 12)")
    parser.add_argument(
        "--intermediate", type=int, default=0, help="MLP size (default: about 8/3 x hidden)"
    )
    parser.add_argument("--context", type=int, default=4096, help="context length (default 4096)")
    parser.add_argument(
        "--tokens", type=int, default=128, help="max_output_tokens per request (default 128)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="repeats per measurement; medians (default 3)"
    )
    parser.add_argument(
        "--streams",
        type=lambda s: sorted({int(x) for x in s.split(",")}),
        default=[1, 4, 8],
        help="concurrent stream counts, comma-separated, must include 1 (default 1,4,8)",
    )
    parser.add_argument(
        "--prompt-tokens", type=int, default=64, help="prompt length of decode runs (default 64)"
    )
    parser.add_argument(
        "--history-tokens",
        type=int,
        default=2000,
        help="first-turn input length for the previous_response_id TTFT (default 2000)",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=16,
        help="decode batch cap for every contender (default 16, our server's default)",
    )
    parser.add_argument(
        "--file-tokens",
        type=int,
        default=1000,
        help="length of the file in the repetitive workload's context (default 1000)",
    )
    parser.add_argument(
        "--repetitive-repeats",
        type=int,
        default=3,
        help="single-stream repetitive runs per repeat, contenders interleaved (default 3)",
    )
    parser.add_argument(
        "--num-draft-tokens",
        type=int,
        default=8,
        help="--num-draft-tokens of the spec server (default 8)",
    )
    parser.add_argument(
        "--draft-layers",
        type=int,
        default=2,
        help="layers of the draft server's model: the bench model's first ones (default 2)",
    )
    parser.add_argument(
        "--tokenizer-from",
        type=Path,
        default=BUNDLED_MODEL,
        help=f"folder whose tokenizer the model uses (default {BUNDLED_MODEL})",
    )
    parser.add_argument("--seed", type=int, default=0, help="weights and prompts seed (default 0)")
    parser.add_argument(
        "--startup-timeout", type=float, default=300, help="seconds to wait for each server"
    )
    parser.add_argument(
        "--request-timeout", type=float, default=600, help="seconds allowed per request batch"
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        metavar="FILE",
        help="after measuring, profile one more widest-batch run of our server with py-spy "
        "(FILE.svg flamegraph, or FILE.json speedscope)",
    )
    parser.add_argument(
        "--build-only", action="store_true", help="build (or find) the model folder, then exit"
    )
    args = parser.parse_args(argv)
    if 1 not in args.streams:
        parser.error("--streams must include 1")
    if not 1 <= args.draft_layers < args.layers:
        parser.error("--draft-layers must be at least 1 and fewer than --layers")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
