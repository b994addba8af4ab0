"""The runtime: token ids in, verdict log-probabilities (and generations) out.

Knows nothing about pairs, protocols or labels. Rooms, bottom up: `plan/` (pure Python:
prefix tree, width groups, FLOP-bounded chunks), `model/` (load, masks, KV, readout, FLOPs),
the engines `prefill.PrefixEngine` and its reference `naive.NaiveEngine`, the decoder
`decode.Decoder`, `probes` (load-time checks), `reproducible` (MKL's run-to-run GEMM mode),
`vllm/` (the optional backend), and `open`, the one place engines and decoders are built.
"""
