"""A model folder on disk, read without loading its weights: what it must hold (config.json that
transformers can read, tokenizer files, safetensors weights: never pickle, never GGUF), which
weight files transformers loads (`weight_files`), how many numbers they store, and a cheap
content fingerprint of them (`weights_fingerprint`). Every problem is one InputError naming
the folder or file, before anything large is read.
"""
from __future__ import annotations

import glob
import hashlib
import json
import math
import os

from baer_fast.errors import InputError

SINGLE, INDEX = "model.safetensors", "model.safetensors.index.json"    # what transformers looks for, in order
VOCAB_FILES = ("tokenizer.model", "vocab.json", "vocab.txt", "spiece.model", "sentencepiece.bpe.model",
               "tekken.json")
SAMPLE = 64 << 10          # bytes of tensor data hashed at each of the fingerprint's three places
MAX_HEADER = 100 << 20     # the safetensors format's own limit on its JSON header


def check_model_dir(path: str) -> None:
    """A folder with config.json and readable safetensors weights, or an InputError saying what it is."""
    if os.path.isfile(path):
        raise InputError(_a_file(path), path=path)
    if not os.path.isdir(path):
        raise InputError("model directory not found", path=path)
    if not os.path.exists(os.path.join(path, "config.json")):
        raise InputError("not a model directory: no config.json", path=path)
    for file in weight_files(path):
        _header(file)                                   # a truncated or foreign file: refused here


def _a_file(path: str) -> str:
    with open(path, "rb") as f:
        gguf = f.read(4) == b"GGUF" or path.lower().endswith(".gguf")
    if gguf:
        return ("a GGUF file, not a model folder; GGUF is not supported: --model needs a transformers folder "
                "(config.json, tokenizer files, *.safetensors weights)")
    return "a file, not a model folder: --model needs a transformers folder (config.json, tokenizer, *.safetensors)"


def weight_files(path: str) -> list[str]:
    """The safetensors files transformers loads from the folder `path` (full paths, sorted): the
    file config.json's `transformers_weights` names, else model.safetensors, else every file
    model.safetensors.index.json maps a tensor to. Other *.safetensors in the folder (Mistral's
    consolidated.safetensors, a PEFT adapter) are not the model's weights and are not counted."""
    named = _config_json(path).get("transformers_weights")
    for name in [named] if isinstance(named, str) else [SINGLE, INDEX]:
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            continue
        if not name.endswith(".index.json"):
            return [file]
        shards = sorted(set(_index_map(file).values()))
        missing = [s for s in shards if not os.path.isfile(os.path.join(path, s))]
        if missing:
            raise InputError(f"{name} maps tensors to {missing[0]}, which is not in the folder"
                             + (f" ({len(missing) - 1} more missing)" if len(missing) > 1 else ""), path=path)
        return [os.path.join(path, s) for s in shards]
    raise InputError(_no_weights(path), path=path)


def _index_map(file: str) -> dict:
    try:
        with open(file, encoding="utf-8") as f:
            mapping = json.load(f).get("weight_map")
    except (ValueError, AttributeError) as e:
        raise InputError(f"not a safetensors index ({type(e).__name__}: {_first_line(e)})", path=file) from None
    if not isinstance(mapping, dict) or not mapping:
        raise InputError("not a safetensors index: no weight_map", path=file)
    return mapping


def _found(path: str, *patterns: str) -> list[str]:
    return sorted(os.path.basename(f) for p in patterns for f in glob.glob(os.path.join(path, p)))


def _no_weights(path: str) -> str:
    pickled, gguf = _found(path, "*.bin", "*.pt", "*.pth"), _found(path, "*.gguf")
    other = _found(path, "*.safetensors")
    stray = f" ({', '.join(other)} is not the model's weights: transformers loads only {SINGLE} or " \
        f"the files {INDEX} lists)" if other else ""
    if pickled:
        return (f"only pickled weights ({pickled[0]}) were found; pickle can run code on load — convert them to "
                f"safetensors{stray}")
    if gguf:
        return f"GGUF weights ({gguf[0]}) are not supported: a transformers folder with *.safetensors is needed"
    return f"no *.safetensors weights: neither {SINGLE} nor {INDEX}{stray}"


def _header(file: str) -> tuple[dict, int]:
    """(the safetensors JSON header, the byte offset where tensor data starts) of `file`, checked
    against its size: a truncated or foreign file is an InputError, not safetensors' own error."""
    size = os.path.getsize(file)
    with open(file, "rb") as f:
        n = int.from_bytes(f.read(8), "little") if size >= 8 else -1
        if not 0 < n <= min(size - 8, MAX_HEADER):
            raise InputError(f"truncated or not a safetensors file ({size} bytes)", path=file)
        try:
            header = json.loads(f.read(n))
            end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
            raise InputError(f"not a safetensors file: its header does not parse ({_first_line(e)})",
                             path=file) from None
    if 8 + n + end != size:
        raise InputError(f"truncated or damaged: its header describes {end} bytes of tensors, the file holds "
                         f"{size - 8 - n}", path=file)
    return header, 8 + n


def weight_elements(path: str) -> int:
    """Numbers stored in the folder's weight files (`weight_files`), read from their headers (no
    weights are loaded; a tied matrix is stored, and counted, once)."""
    return sum(math.prod(t["shape"]) for file in weight_files(path)
               for k, t in _header(file)[0].items() if k != "__metadata__")


def stored_bytes(path: str) -> int:
    """Bytes of the weight files on disk (a quantized checkpoint's size when loaded)."""
    return sum(os.path.getsize(f) for f in weight_files(path))


def weights_fingerprint(path: str) -> dict:
    """{file name as `weight_files` lists it, relative to `path`: {"size": bytes, "header_sha256": hex
    digest of the safetensors JSON header, "sample_sha256": hex digest of SAMPLE bytes of tensor
    data at the start, the middle and the end of the data section}}. Plain JSON, the same for the
    same files wherever the folder is; another checkpoint of the same shapes and size differs in
    its samples. Reads the header plus 192 KiB per file, so it takes milliseconds on any size."""
    out = {}
    for file in weight_files(path):
        header, start = _header(file)
        size, data = os.path.getsize(file), hashlib.sha256()
        length = size - start
        with open(file, "rb") as f:
            f.seek(8)
            head = hashlib.sha256(f.read(start - 8)).hexdigest()
            for at in (0, max(0, length // 2 - SAMPLE // 2), max(0, length - SAMPLE)):
                f.seek(start + at)
                data.update(f.read(min(SAMPLE, length)))
        out[os.path.relpath(file, path)] = {"size": size, "header_sha256": head, "sample_sha256": data.hexdigest()}
    return out


def _config_json(path: str) -> dict:
    """config.json as JSON; malformed JSON is an InputError at its line."""
    file = os.path.join(path, "config.json")
    try:
        with open(file, encoding="utf-8") as f:
            raw = json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg} (column {e.colno})", path=file, line=e.lineno) from None
    except UnicodeDecodeError:
        raise InputError("not valid JSON: not UTF-8 text", path=file) from None
    if not isinstance(raw, dict):
        raise InputError("not a model config: the JSON is not an object", path=file)
    return raw


def read_config(path: str, *, trust_remote_code: bool = False):
    """transformers' config of the folder, or an InputError naming config.json and the reason
    (malformed JSON, a model_type this transformers does not know, remote code not allowed)."""
    import transformers
    from transformers import AutoConfig
    raw = _config_json(path)
    try:
        return AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    except (ValueError, KeyError, TypeError, OSError) as e:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        kind, ships_code = raw.get("model_type"), "auto_map" in raw
        if ships_code and not trust_remote_code:
            why = "the folder's own code (auto_map) defines this model: pass --trust-remote-code to run it"
        elif isinstance(kind, str) and kind not in CONFIG_MAPPING_NAMES and not ships_code:
            why = (f"model_type {kind!r} is not a model transformers {transformers.__version__} knows (a newer "
                   "transformers may)")
        else:
            why = f"transformers {transformers.__version__} cannot read it: {type(e).__name__}: {_first_line(e)}"
        raise InputError(why, path=os.path.join(path, "config.json")) from None


def check_tokenizer_files(path: str, *, trust_remote_code: bool = False) -> None:
    """Refuse a folder with no tokenizer: transformers would build an empty one from config.json
    alone, and the failure would surface later as a verdict label of 0 tokens."""
    names = set(os.listdir(path))
    if "tokenizer.json" in names or names & set(VOCAB_FILES) or any(n.endswith(".tiktoken") for n in names):
        return
    if trust_remote_code and "tokenizer_config.json" in names:        # remote code names its own vocab files
        return
    raise InputError("no tokenizer files (tokenizer.json, or tokenizer_config.json with its vocabulary: "
                     "tokenizer.model, vocab.json + merges.txt, or vocab.txt)", path=path)


def read_tokenizer(path: str, *, trust_remote_code: bool = False):
    """The folder's transformers tokenizer, once its files are there (check_tokenizer_files)."""
    from transformers import AutoTokenizer
    check_tokenizer_files(path, trust_remote_code=trust_remote_code)
    return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)


def _first_line(e: BaseException) -> str:
    return next((line.strip() for line in str(e).splitlines() if line.strip()), "")
