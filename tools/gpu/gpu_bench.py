"""Serving overhead at accelerator speed: mlx-responses vs mlx-lm in process and mlx_lm.server,
on one random-weight qwen3 model (bf16), single stream and N concurrent streams.

Run with PYTHONPATH holding mlx (+cuda), mlx-lm and the project's code:
  python gpu_bench.py --out DIR [--shape tiny|1.7b|4b] [--streams 1,8,32,64] [--tokens 256]
Prints one JSON line per measurement and writes DIR/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
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
from pathlib import Path

import httpx

SHAPES = {  # hidden, layers, intermediate, heads, kv_heads, vocab
    "micro": (64, 2, 192, 2, 1, None),
    "tiny": (256, 4, 768, 4, 2, None),
    "1.7b": (2048, 28, 6144, 16, 8, 151936),
    "4b": (2560, 36, 9728, 32, 8, 151936),
}
NICE = re.compile(r"^ ?[A-Za-z]+$")
RESULTS: dict = {}
QUANT_BITS = int(os.environ.get("QUANT_BITS", "0"))
PROFILE_OUT: Path | None = None


def log(metric: str, **kw) -> None:
    RESULTS.setdefault(metric, []).append(kw)
    print(json.dumps({"m": metric, **kw}), flush=True)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def build(out: Path, shape: str, proj: Path) -> Path:
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen3
    from tokenizers import Tokenizer

    from tests.support.random_model import TOKENIZER_FILES, _end_ids, _never_emit

    tok_from = proj / "mlx_responses" / "service" / "assets" / "tiny-chat"
    hidden, layers, inter, heads, kv, vocab = SHAPES[shape]
    base = json.loads((tok_from / "config.json").read_text())
    tok_vocab = base["vocab_size"]
    vocab = vocab or tok_vocab
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (tok_from / name).exists():
            shutil.copy(tok_from / name, out / name)
    cfg = {
        "model_type": "qwen3",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "intermediate_size": inter,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": hidden // heads,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "max_position_embeddings": 8192,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "eos_token_id": base.get("eos_token_id"),
        "torch_dtype": "bfloat16",
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    tk = Tokenizer.from_file(str(tok_from / "tokenizer.json"))
    banned = set(_end_ids(tok_from, cfg["eos_token_id"]))
    for i in range(tok_vocab):
        if not NICE.match(tk.decode([i])):
            banned.add(i)
    banned |= set(range(tok_vocab, vocab))  # rows past the tokenizer: never emitted
    mx.random.seed(0)
    model = qwen3.Model(qwen3.ModelArgs.from_dict(cfg))
    model.set_dtype(mx.float32)
    _never_emit(model, sorted(banned))
    model.set_dtype(mx.bfloat16)
    if QUANT_BITS:
        from mlx import nn

        nn.quantize(
            model,
            group_size=64,
            bits=QUANT_BITS,
            class_predicate=lambda path, m: (
                hasattr(m, "to_quantized") and m.weight.shape[-1] % 64 == 0
            ),
        )
        cfg["quantization"] = {"group_size": 64, "bits": QUANT_BITS}
        (out / "config.json").write_text(json.dumps(cfg, indent=2))
    mx.eval(model.parameters())
    weights = dict(tree_flatten(model.parameters()))
    n = sum(v.size for v in weights.values())
    mx.save_safetensors(str(out / "model.safetensors"), weights)
    log(
        "model",
        shape=shape,
        params=n,
        gb=round(n * 2 / 1e9, 2),
        allowed=tok_vocab - len(banned & set(range(tok_vocab))),
    )
    return out


def prompts(model_dir: Path, n: int, length: int, seed: int) -> list[str]:
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    words = sorted({tk.decode([i]).strip() for i in range(tk.get_vocab_size())} - {""})
    words = [w for w in words if NICE.match(w)]
    rng = random.Random(seed)
    return [
        f"run{rng.randrange(1 << 30)} " + " ".join(rng.choices(words, k=length)) for _ in range(n)
    ]


def inprocess(model_dir: Path, tokens: int, streams: list[int], text: list[str]) -> None:
    import mlx.core as mx
    from mlx_lm import load, stream_generate
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    model, tok = load(str(model_dir))
    enc = [
        tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True)
        for t in text
    ]
    for rep in range(3):
        first = None
        n = 0
        for r in stream_generate(
            model, tok, enc[rep], max_tokens=tokens, sampler=make_sampler(0.0)
        ):
            if first is None:
                first = time.perf_counter()
            n = r.generation_tokens
        rate = (n - 1) / (time.perf_counter() - first)
        if rep:
            log(
                "inproc_single",
                tok_s=round(rate, 1),
                tokens=n,
                peak_gb=round(mx.get_peak_memory() / 1e9, 2),
            )
    eos = sorted(tok.eos_token_ids)
    for b in [s for s in streams if s > 1]:
        for rep in range(2):
            gen = BatchGenerator(
                model,
                stop_tokens=[[t] for t in eos],
                completion_batch_size=b,
                prefill_batch_size=min(8, b),
                prefill_step_size=512,
            )
            t0 = time.perf_counter()
            uids = gen.insert(
                [enc[(rep * b + i) % len(enc)] for i in range(b)], max_tokens=[tokens] * b
            )
            pending, count = set(uids), 0
            while pending:
                _, resp = gen.next()
                for r in resp:
                    count += 1
                    if r.finish_reason is not None:
                        pending.discard(r.uid)
            wall = time.perf_counter() - t0
            gen.close()
            log(
                "batchgen",
                streams=b,
                agg_tok_s=round(count / wall, 1),
                tokens=count,
                wall=round(wall, 2),
            )
    if os.environ.get("BATCHGEN_EXTRA"):
        for b, per_step in ((1, 1), (64, 4), (64, 64)):
            for rep in range(2):
                gen = BatchGenerator(
                    model,
                    stop_tokens=[[t] for t in eos],
                    completion_batch_size=max(b, 8),
                    prefill_batch_size=8,
                    prefill_step_size=512,
                )
                todo = [enc[(rep * b + i + 7) % len(enc)] for i in range(b)]
                t0 = time.perf_counter()
                pending, count, first = set(), 0, None
                while todo or pending:
                    if todo:
                        batch, todo = todo[:per_step], todo[per_step:]
                        new = gen.insert(batch, max_tokens=[tokens] * len(batch))
                        pending |= set(new)
                    _, resp = gen.next()
                    if resp and first is None:
                        first = time.perf_counter()
                    for r in resp:
                        count += 1
                        if r.finish_reason is not None:
                            pending.discard(r.uid)
                wall = time.perf_counter() - t0
                gen.close()
                log(
                    "batchgen_arrivals",
                    streams=b,
                    inserted_per_step=per_step,
                    agg_tok_s=round(count / wall, 1),
                    tokens=count,
                    wall=round(wall, 2),
                    decode_tok_s=round((count - b) / (time.perf_counter() - first), 1),
                )
    del model
    mx.clear_cache()


async def one_stream(c: httpx.AsyncClient, url: str, body: dict, kind: str) -> dict:
    t0 = time.perf_counter()
    first = last = None
    events = 0
    usage = None
    async with c.stream("POST", url, json=body) as r:
        if r.status_code != 200:
            return {
                "error": r.status_code,
                "body": (await r.aread())[:300].decode("utf-8", "replace"),
            }
        async for line in r.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                continue
            d = json.loads(data)
            if kind.startswith("ours"):
                t = d.get("type")
                if t in ("response.output_text.delta", "response.reasoning_text.delta"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    events += 1
                elif t in ("response.completed", "response.incomplete", "response.failed"):
                    usage = d["response"].get("usage", {}).get("output_tokens")
            else:
                ch = d.get("choices") or []
                if ch and (
                    (ch[0].get("delta") or {}).get("content")
                    or (ch[0].get("delta") or {}).get("reasoning")
                ):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    events += 1
                if d.get("usage"):
                    usage = d["usage"].get("completion_tokens")
    n = usage or events
    return {
        "n": n,
        "events": events,
        "ttft": (first or t0) - t0,
        "rate": (n - 1) / (last - first) if first and last and last > first else 0.0,
        "t0": t0,
        "end": time.perf_counter(),
    }


async def drive(  # noqa: PLR0917
    base: str,
    kind: str,
    model: str,
    tokens: int,
    streams: list[int],
    text: list[str],
    pid: int,
    extra: tuple[int, ...] = (),
) -> None:
    try:
        import psutil
    except ImportError:  # optional: only the server-CPU figures need it
        psutil = None

    url = base + ("/v1/responses" if kind.startswith("ours") else "/v1/chat/completions")

    def body(i: int) -> dict:
        t = text[i % len(text)]
        if kind.startswith("ours"):
            return {
                "model": model,
                "input": t,
                "stream": True,
                "max_output_tokens": tokens,
                "temperature": 0,
                "store": False,
            }
        return {
            "model": model,
            "messages": [{"role": "user", "content": t}],
            "stream": True,
            "max_tokens": tokens,
            "temperature": 0,
            "stream_options": {"include_usage": True},
        }

    procs = (
        [psutil.Process(p) for p in (pid, *extra)] + psutil.Process(pid).children(recursive=True)
        if psutil
        else []
    )
    limits = httpx.Limits(max_connections=512, max_keepalive_connections=512)
    async with httpx.AsyncClient(timeout=httpx.Timeout(900, connect=30), limits=limits) as c:
        await one_stream(c, url, body(0), kind)  # warm-up
        k = 1
        for b in streams:
            for rep in range(2 if b > 1 else 3):
                cpu0 = sum(sum(p.cpu_times()[:2]) for p in procs)
                spy = None
                if os.environ.get("PYSPY") and PROFILE_OUT and rep == 1 and b in (1, max(streams)):
                    spy = subprocess.Popen(
                        [
                            os.environ["PYSPY"],
                            "record",
                            "--pid",
                            str(pid),
                            "--duration",
                            "2" if b == 1 else "6",
                            "--rate",
                            "250",
                            "--threads",
                            "--nonblocking",
                            "--format",
                            "raw",
                            "-o",
                            str(PROFILE_OUT / f"prof-{kind}-{b}.txt"),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.STDOUT,
                    )
                t0 = time.perf_counter()
                outs = await asyncio.gather(
                    *[one_stream(c, url, body(k + i), kind) for i in range(b)]
                )
                wall = time.perf_counter() - t0
                cpu = sum(sum(p.cpu_times()[:2]) for p in procs) - cpu0
                k += b
                if spy is not None:
                    spy.wait(30)
                errs = [o for o in outs if "error" in o]
                ok = [o for o in outs if "error" not in o]
                total = sum(o["n"] for o in ok)
                log(
                    kind,
                    streams=b,
                    agg_tok_s=round(total / wall, 1),
                    per_stream_tok_s=round(statistics.median(o["rate"] for o in ok), 1)
                    if ok
                    else 0,
                    ttft_p50=round(statistics.median(o["ttft"] for o in ok), 3) if ok else 0,
                    ttft_max=round(max(o["ttft"] for o in ok), 3) if ok else 0,
                    tokens=total,
                    events=sum(o["events"] for o in ok),
                    errors=len(errs),
                    first_error=errs[0] if errs else None,
                    server_cpu_s=round(cpu, 2),
                    server_cores=round(cpu / wall, 2),
                    wall=round(wall, 2),
                )


def wait_up(base: str, proc: subprocess.Popen, path: str, timeout: float = 300) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}")
        try:
            if httpx.get(base + path, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("server not up")


def serve(  # noqa: PLR0917
    kind: str,
    argv: list[str],
    base: str,
    path: str,
    out: Path,
    model: str,
    tokens: int,
    streams: list[int],
    text: list[str],
    extra: tuple[int, ...] = (),
) -> None:
    logf = open(out / f"server-{kind}.log", "w")  # noqa: SIM115 (closed after the run)
    t = time.time()
    proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_up(base, proc, path)
        log("startup", kind=kind, s=round(time.time() - t, 1))
        asyncio.run(drive(base, kind, model, tokens, streams, text, proc.pid, extra))
    except Exception as e:  # keep going with the next contender
        log("error", kind=kind, error=repr(e)[:400])
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        logf.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shape", default="1.7b", choices=list(SHAPES))
    ap.add_argument("--streams", default="1,8,32,64")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--prompt-words", type=int, default=48)
    ap.add_argument("--proj", type=Path, required=True)
    ap.add_argument("--only", default="inproc,ours,mlxlm,split")
    ap.add_argument("--switch-interval", type=float, default=0.0002)
    args = ap.parse_args()
    global PROFILE_OUT  # noqa: PLW0603
    PROFILE_OUT = args.out
    proj = str(args.proj.resolve())
    sys.path.insert(0, proj)  # tests.support.random_model, and the servers' code below
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [proj, os.environ.get("PYTHONPATH")]))
    streams = [int(s) for s in args.streams.split(",")]
    only = set(args.only.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    import mlx.core as mx

    log("device", device=str(mx.default_device()), mlx=mx.__version__)
    model_dir = Path("/tmp/benchmodel-" + args.shape + (f"-q{QUANT_BITS}" if QUANT_BITS else ""))
    t = time.time()
    build(model_dir, args.shape, args.proj)
    log("built", s=round(time.time() - t, 1))
    text = prompts(model_dir, 400, args.prompt_words, 1)
    py = sys.executable
    mb = str(max(streams))
    if "inproc" in only:
        inprocess(model_dir, args.tokens, streams, text)
    if "ours" in only:
        hp, gp = free_port(), free_port()
        serve(
            "ours",
            [
                py,
                "-m",
                "mlx_responses.launcher.cli",
                "--log-level",
                "WARNING",
                "serve",
                "--model",
                str(model_dir),
                "--port",
                str(hp),
                "--grpc-port",
                str(gp),
                "--max-batch-size",
                mb,
                "--max-queued-requests",
                "512",
            ],
            f"http://127.0.0.1:{hp}",
            "/health",
            args.out,
            model_dir.name,
            args.tokens,
            streams,
            text,
        )
    variants = {  # `serve` with extra flags, for an A/B in the same run
        "ours_slots": ["--engine", "slots"],  # our fixed-slot scheduler (auto takes batch on a GPU)
        "ours_batch": ["--engine", "batch"],
        "ours_ngram": ["--speculative", "ngram"],
        "ours_x": os.environ.get("OURS_X_FLAGS", "").split(),
    }
    for kind, extra in variants.items():
        if kind not in only:
            continue
        hp, gp = free_port(), free_port()
        serve(
            kind,
            [
                py,
                "-m",
                "mlx_responses.launcher.cli",
                "--log-level",
                "WARNING",
                "serve",
                "--model",
                str(model_dir),
                "--port",
                str(hp),
                "--grpc-port",
                str(gp),
                "--max-batch-size",
                mb,
                "--max-queued-requests",
                "512",
                *extra,
            ],
            f"http://127.0.0.1:{hp}",
            "/health",
            args.out,
            model_dir.name,
            args.tokens,
            streams,
            text,
        )
    if "ours_si" in only:
        hp, gp = free_port(), free_port()
        wrap = (
            "import sys, runpy; sys.setswitchinterval(float(sys.argv.pop(1))); "
            "runpy.run_module('mlx_responses.launcher.cli', run_name='__main__', alter_sys=True)"
        )
        serve(
            "ours_si",
            [
                py,
                "-c",
                wrap,
                str(args.switch_interval),
                "--log-level",
                "WARNING",
                "serve",
                "--model",
                str(model_dir),
                "--port",
                str(hp),
                "--grpc-port",
                str(gp),
                "--max-batch-size",
                mb,
                "--max-queued-requests",
                "512",
            ],
            f"http://127.0.0.1:{hp}",
            "/health",
            args.out,
            model_dir.name,
            args.tokens,
            streams,
            text,
        )
    if "split" in only:
        hp, gp = free_port(), free_port()
        core = subprocess.Popen(
            [
                py,
                "-m",
                "mlx_responses.launcher.cli",
                "--log-level",
                "WARNING",
                "core",
                "--model",
                str(model_dir),
                "--grpc-port",
                str(gp),
                "--max-batch-size",
                mb,
                "--max-queued-requests",
                "512",
            ],
            stdout=open(args.out / "server-core.log", "w"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            serve(
                "ours_split",
                [
                    py,
                    "-m",
                    "mlx_responses.launcher.cli",
                    "--log-level",
                    "WARNING",
                    "facade",
                    "--port",
                    str(hp),
                    "--core",
                    f"127.0.0.1:{gp}",
                ],
                f"http://127.0.0.1:{hp}",
                "/health",
                args.out,
                model_dir.name,
                args.tokens,
                [1, max(streams)],
                text,
                (core.pid,),
            )
        finally:
            os.killpg(core.pid, signal.SIGTERM)
            core.wait(30)
    if "mlxlm" in only:
        hp = free_port()
        serve(
            "mlx_lm_server",
            [
                py,
                "-m",
                "mlx_lm",
                "server",
                "--model",
                str(model_dir),
                "--port",
                str(hp),
                "--decode-concurrency",
                mb,
                "--prompt-concurrency",
                "8",
                "--log-level",
                "WARNING",
            ],
            f"http://127.0.0.1:{hp}",
            "/v1/models",
            args.out,
            str(model_dir),
            args.tokens,
            streams,
            text,
        )
    (args.out / "results.json").write_text(json.dumps(RESULTS, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
