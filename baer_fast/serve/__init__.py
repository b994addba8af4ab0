"""The HTTP judge server: requests in, the Judge's score records out.

`config.py` (the one source of defaults), `batcher.py` (concurrent requests merged into one
engine call), `app.py` (FastAPI routes, auth, body limit, error shapes), `metrics.py`
(Prometheus), `server.py` (uvicorn, graceful SIGTERM). Knows nothing about engines: it calls
`Judge.results` on a worker thread. Clients are in `baer_fast.client`. docs/serving.md.
"""
