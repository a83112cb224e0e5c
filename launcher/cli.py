"""The `mlx-responses` command: serve (core + façade), core, or facade alone."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mlx_responses.http_facade.config import (
    FacadeConfigError,
    FacadeSettings,
    facade_settings_from_args,
)
from mlx_responses.launcher.exposure import warn_if_exposed
from mlx_responses.launcher.logs import configure_logging
from mlx_responses.service import flags
from mlx_responses.service.config import ConfigError, read_environment, settings_from_args
from mlx_responses.service.flags import EnvValueError
from mlx_responses.service.models.model_dir import check_model_dirs
from mlx_responses.service.models.pool import served_ids
from mlx_responses.service.models.source import ModelNotFoundError, resolve_model

log = logging.getLogger("mlx_responses")


def build_parser() -> argparse.ArgumentParser:
    """The command line, with --help text on every flag (all declared in service/flags.py)."""
    env = read_environment()
    parser = argparse.ArgumentParser(
        prog="mlx-responses",
        description="Serve a local MLX model behind the OpenAI Responses API.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    helps = {
        flags.SERVE: "run the gRPC core and the HTTP façade in one process (over loopback gRPC)",
        flags.CORE: "run the gRPC core alone",
        flags.FACADE: "run the HTTP façade alone, against a core",
    }
    try:
        flags.add_arguments(parser, flags.TOP, env)
        for command in flags.COMMANDS:
            flags.add_arguments(commands.add_parser(command, help=helps[command]), command, env)
    except EnvValueError as exc:  # as a flag's bad value: a usage error, exit 2
        parser.error(str(exc))
    return parser


async def _wait_for_signal(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _run_facade(
    core_addresses: Sequence[str], settings: FacadeSettings, stop: asyncio.Event
) -> None:
    from mlx_responses.http_facade.app import start_facade

    runner, _ = await start_facade(core_addresses, settings)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


async def _run(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    signals = asyncio.create_task(_wait_for_signal(stop))
    env = read_environment()
    facade_settings = None
    if args.command in ("serve", "facade"):
        try:
            facade_settings = facade_settings_from_args(args, env)
        except FacadeConfigError as exc:
            log.error("invalid configuration: %s", exc)
            return 2
    if facade_settings is not None:
        warn_if_exposed("the HTTP façade", facade_settings.host, bool(facade_settings.api_keys))
    if args.command == "facade":
        assert facade_settings is not None
        await _run_facade(args.core, facade_settings, stop)
        signals.cancel()
        return 0
    try:
        settings = settings_from_args(args, env)
        if not settings.allow_download:  # fail fast: nothing to download
            served_ids([resolve_model(m) for m in settings.models], settings.model_aliases)
            check_model_dirs(settings.model_dirs)
            if settings.draft_model is not None:
                resolve_model(settings.draft_model)
    except (ConfigError, ModelNotFoundError) as exc:
        log.error("invalid configuration: %s", exc)
        return 2
    from mlx_responses.service.engine.blas import preload_blas

    preload_blas(settings.blas)  # before anything imports mlx
    from mlx_responses.service.engine.distributed.load import join_group, release_stdin

    group = join_group()  # under mlx.launch: this process's group, else None
    if group is not None:
        release_stdin()
        from mlx_responses.service.models.distributed import group_settings, run_follower
        from mlx_responses.service.models.pool import engine_worker

        try:
            settings = group_settings(settings)
        except (ConfigError, ModelNotFoundError) as exc:
            log.error("invalid configuration: %s", exc)
            return 2
        if group.rank() != 0:  # the other ranks run only the engine, fed by rank 0
            code = await run_follower(settings, group, engine_worker, stop)
            signals.cancel()
            return code
        log.info("rank 0 of %d: serving, %s parallel", group.size(), settings.distributed)
    elif settings.distributed != "auto":
        log.error(
            "invalid configuration: --distributed %s needs a group of processes: start them "
            "with mlx.launch (docs/guides/distributed.md)",
            settings.distributed,
        )
        return 2
    from mlx_responses.service.core import Core
    from mlx_responses.service.server import start_core_server

    warn_if_exposed(
        "the gRPC core",
        settings.grpc_host,
        bool(settings.api_keys),
        settings.grpc_tls_cert is not None,
    )
    core = Core.from_settings(settings)
    # With TLS on the gRPC port, serve's own façade reaches the core over a private unix socket.
    private = None
    if settings.grpc_tls_cert is not None and facade_settings is not None:
        private = tempfile.TemporaryDirectory(prefix="mlx-responses-")
    local = str(Path(private.name) / "core.sock") if private is not None else None
    server = await start_core_server(core, settings.grpc_host, settings.grpc_port, local)
    facade = metrics = None
    try:
        if settings.metrics_port is not None:
            from mlx_responses.service.rpc.metrics_server import start_metrics_server

            metrics, _ = await start_metrics_server(core, settings.grpc_host, settings.metrics_port)
        if facade_settings is not None:
            from mlx_responses.http_facade.app import start_facade

            address = f"unix:{local}" if local else f"127.0.0.1:{server.port}"
            # One process: the façade's /metrics carries the core's metrics too.
            facade, _ = await start_facade(address, facade_settings, core.metrics.render)
        try:
            await core.load()
        except (ConfigError, ModelNotFoundError) as exc:  # e.g. with --allow-download
            log.error("invalid configuration: %s", exc)
            return 2
        await server.set_serving()
        server.follow_group()
        log.info("ready: models %s", ", ".join(core.models.models))
        await stop.wait()
    finally:
        grace = settings.shutdown_grace_secs
        log.info("shutting down: running responses get up to %gs to finish", grace)
        # The façade stops listening at once; its running handlers end as the core drains.
        facade_stopped = asyncio.create_task(facade.cleanup()) if facade is not None else None
        report = await server.shutdown(grace)
        if facade_stopped is not None:
            await facade_stopped
        log.info(
            "stopped: %d responses finished in the grace period, %d cancelled",
            report.finished,
            report.cancelled,
        )
        if metrics is not None:
            await metrics.cleanup()
        if private is not None:
            private.cleanup()
        signals.cancel()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main())
