"""Run the app on uvicorn. SIGTERM (or Ctrl-C): stop accepting connections, let in-flight requests
finish (up to `drain_s`), stop the batcher, return 0."""
from __future__ import annotations

import logging
import signal

from baer_fast.serve.config import ServeConfig

log = logging.getLogger("baer_fast")


def uvicorn_server(judge, config: ServeConfig):
    import uvicorn

    from baer_fast.serve.app import create_app
    ucfg = uvicorn.Config(create_app(judge, config), host=config.host, port=config.port, log_level="warning",
                          access_log=False, lifespan="on", timeout_graceful_shutdown=config.drain_s)
    return uvicorn.Server(ucfg)


def serve(judge, config: ServeConfig) -> int:
    server = uvicorn_server(judge, config)
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again once its own handler
    # is gone; with this handler in place that second SIGTERM is a no-op, so the exit code is ours
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        log.warning("serving head %r on http://%s:%d (POST /v1/judge, POST /get_reward, GET /health, GET /metrics)",
                    judge.art["head"], config.host, config.port)
        server.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not server.started:
        return 1                          # e.g. the port was taken (uvicorn logged why)
    log.warning("stopped: in-flight requests answered")
    return 0
