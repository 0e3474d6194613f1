"""The server's HTTP side, on Flask (served by waitress, as OpenNMT-py's onmt_server is): OpenNMT-py's JSON API.

- ``POST {url_root}/translate`` with ``[{"src": "...", "id": N}, ...]`` -> ``[[{"src", "tgt", "n_best",
  "pred_score"}, ...]]``, OpenNMT-py's shape: one list per rank (the inputs' 1-bests, then with ``{"n_best": K}``
  in an input its 2nd-bests in a second list, ...), ``"n_best"`` the count the input asked for;
- ``GET {url_root}/models``: the configured models; ``GET /health`` (and ``{url_root}/health``): status and counts,
  answered by a thread of its own (bin/server.py) even while every worker waits on a translation;
- OpenNMT-py's model routes: ``POST {url_root}/clone_model/ID`` (body ``{"opt": {...}, "timeout": T}``: a copy with
  other decoding options, loaded now -> its ``model_id`` and ``load_time``), ``GET {url_root}/unload_model/ID``,
  ``GET {url_root}/to_cpu/ID`` and ``GET {url_root}/to_gpu/ID``.

Every error is ``{"status": "error", "error": "..."}`` (OpenNMT-py's body): 4xx for a bad request, 503 for a model
that cannot be loaded or a timeout, 500 for a translation that failed; what names the server's files goes to its log
only. A request whose client hangs up is dropped: its sentences not yet translated are not translated."""

import threading
import time

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from onmt_cont.serve.models import ModelUnavailable, TranslationFailed
from onmt_cont.utils.errors import UserError

MAX_SENTENCES = 1000  # per request
MAX_CHARS = 100_000  # per sentence
MAX_BODY = 16 << 20  # bytes of JSON per request (waitress refuses a longer Content-Length before reading it)
POLL_S = 0.2  # how often a waiting request checks that its client is still there
# load()'s keywords that name files or devices: a clone_model request may not set them
FILE_OPTIONS = {
    "lexicon",
    "lookup_dict",
    "freq_offsets",
    "bpe_codes",
    "src_bpe_codes",
    "src_spm",
    "tgt_spm",
    "ensemble",
    "tgt_emb_extend",
    "tgt_emb_extend_vocab",
    "device",
    "gpu",
    "engine",
    "ann",
    "ann_index",
}


class InFlight:
    """The requests being answered, so that a stop waits for them."""

    def __init__(self):
        self.n, self._lock = 0, threading.Lock()

    def __enter__(self):
        with self._lock:
            self.n += 1

    def __exit__(self, *exc):
        with self._lock:
            self.n -= 1


def error(status, message, **fields):
    response = jsonify({"status": "error", "error": message, **fields})  # OpenNMT-py's error body
    response.status_code = status
    return response


def create_app(entries, url_root="/translator", request_timeout=600.0):
    """The Flask app over ``entries`` ({id: ModelEntry}, onmt_cont.serve.models)."""
    app = Flask("onmt_cont.serve")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.in_flight = InFlight()
    app.stopping = False
    root = "/" + url_root.strip("/") if url_root.strip("/") else ""

    @app.errorhandler(HTTPException)
    def http_error(exc):  # 404 of an unknown path, 405, 413 of an oversized body: JSON like every other error
        return error(exc.code, exc.description)

    @app.get("/health")
    @app.get(f"{root}/health")
    def health():
        return jsonify(
            {
                "status": "stopping" if app.stopping else "ok",
                "models": {
                    str(m.id): {
                        "loaded": m.model is not None,
                        "batches": m.batches,
                        "sentences": m.sentences,
                        "dropped": m.dropped,
                    }
                    for m in list(entries.values())
                },
            }
        )

    @app.get(f"{root}/models")
    def models():
        return jsonify([m.describe() for m in list(entries.values())])

    # OpenNMT-py's model routes: each answers {"status": "ok", "model_id": N, ...} or an error of the same shape
    new_ids = threading.Lock()

    def entry_of(model_id):
        if model_id not in entries:
            raise LookupError(f"no model with id {model_id} (GET {root}/models lists them)")
        return entries[model_id]

    def model_route(action):
        def route(model_id):
            try:
                answer = action(entry_of(model_id))
            except LookupError as exc:
                return error(404, str(exc), model_id=model_id)
            except UserError as exc:
                return error(400, str(exc), model_id=model_id)
            return jsonify({"status": "ok", "model_id": model_id, **(answer or {})})

        route.__name__ = action.__name__
        return route

    @app.post(f"{root}/clone_model/<int:model_id>")
    def clone_model(model_id):
        """A copy of model ``model_id`` with the body's "opt" over its options and its own "timeout", loaded now.
        Options that name files are refused: no request may make the server read a file."""
        body = request.get_json(force=True, silent=True)
        body = {} if body is None else body
        opt, timeout = (body.get("opt") or {}, body.get("timeout", -1)) if isinstance(body, dict) else (None, None)
        if (
            not isinstance(opt, dict)
            or isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not (timeout == -1 or timeout >= 0)
        ):
            return error(400, 'expected {"opt": {...}, "timeout": seconds or -1}', model_id=model_id)
        files = sorted(set(opt) & FILE_OPTIONS)
        if files:
            return error(
                400,
                f"clone_model takes decoding options; {', '.join(files)} name files or devices, which "
                "only the server's configuration may",
                model_id=model_id,
            )
        try:
            parent = entry_of(model_id)
        except LookupError as exc:
            return error(404, str(exc), model_id=model_id)
        start = time.monotonic()
        with new_ids:
            new_id = max(entries) + 1
            try:
                entries[new_id] = parent.clone(new_id, opt, float(timeout))
            except UserError as exc:
                return error(400, str(exc), model_id=model_id)
        return jsonify({"status": "ok", "model_id": new_id, "load_time": round(time.monotonic() - start, 3)})

    def unload_model(entry):
        entry.unload()

    def to_cpu(entry):
        entry.move("cpu")

    def to_gpu(entry):
        entry.move("cuda")

    for action in (unload_model, to_cpu, to_gpu):
        app.get(f"{root}/{action.__name__}/<int:model_id>")(model_route(action))

    @app.post(f"{root}/translate")
    def translate():
        if app.stopping:
            return error(503, "the server is stopping")
        with app.in_flight:
            try:
                inputs = request.get_json(force=True, silent=True)
            except RecursionError:  # a body of 100,000 nested brackets: Python's parser gives up
                inputs = None
            if inputs is None:
                return error(400, 'the body is not JSON: expected [{"src": "...", "id": N}, ...]')
            if not isinstance(inputs, list) or not inputs:
                return error(400, 'expected a non-empty list [{"src": "...", "id": N}, ...]')
            if len(inputs) > MAX_SENTENCES:
                return error(413, f"{len(inputs)} inputs: at most {MAX_SENTENCES} a request")
            groups = {}  # (model id, n_best) -> [(position, src)]
            for i, item in enumerate(inputs):
                if not isinstance(item, dict) or not isinstance(item.get("src"), str):
                    return error(400, f'input {i}: expected {{"src": "...", "id": N}}')
                src, mid = item["src"], item.get("id", next(iter(entries)))
                n_best = item.get("n_best", entries[mid].n_best if isinstance(mid, int) and mid in entries else 1)
                bad = _unencodable(src)
                if bad is not None:
                    return error(400, f"input {i}: not Unicode text: {bad}")
                if len(src) > MAX_CHARS:
                    return error(413, f"input {i}: {len(src):,} characters: at most {MAX_CHARS:,} a sentence")
                if "\n" in src.strip():
                    return error(400, f"input {i}: a sentence holds a line break: give one sentence per input")
                if not isinstance(mid, int) or isinstance(mid, bool) or mid not in entries:
                    return error(404, f"input {i}: no model with id {mid!r} (GET {root}/models lists them)")
                if not isinstance(n_best, int) or isinstance(n_best, bool) or n_best < 1:
                    return error(400, f'input {i}: "n_best" must be a positive integer')
                groups.setdefault((mid, n_best), []).append((i, src))
            gone = request.environ.get("waitress.client_disconnected", lambda: False)
            jobs = [
                (group, entries[mid].translate([s for _, s in group], n_best, gone))
                for (mid, n_best), group in groups.items()
            ]
            out = [None] * len(inputs)
            try:
                for group, job in jobs:
                    for (i, src), hyps in zip(group, _wait(job, request_timeout, gone), strict=True):
                        out[i] = [
                            {
                                "src": src,
                                "tgt": h[0],
                                "n_best": len(hyps),
                                "pred_score": h[1],
                                **({"align": h[2]} if len(h) > 2 else {}),
                            }
                            for h in hyps
                        ]
            except UserError as exc:
                return error(400, str(exc))
            except ModelUnavailable as exc:
                return error(503, str(exc))
            except TranslationFailed as exc:
                return error(500, str(exc))
            except TimeoutError:
                return error(503, f"the translation took more than {request_timeout:g} s")
            except ConnectionAbortedError:  # the client has gone: nobody reads the answer
                return error(499, "the client has gone")
            finally:
                for _, job in jobs:
                    job.drop()  # what is still queued of a failed, timed-out or abandoned request is not translated
            # OpenNMT-py's shape: one list per rank (the 1-bests of every input, then the 2nd-bests, ...), each
            # hypothesis saying how many its input asked for ("n_best": 1 for the 1-best alone)
            ranks = max(len(hyps) for hyps in out)
            return jsonify([[hyps[k] for hyps in out if k < len(hyps)] for k in range(ranks)])

    return app


def _wait(job, timeout, gone):
    """The job's results, checking every POLL_S that the client is still there (waitress sees it hang up)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return job.future.result(timeout=min(POLL_S, max(0.0, deadline - time.monotonic())))
        except TimeoutError:
            if gone():
                raise ConnectionAbortedError from None
            if time.monotonic() >= deadline:
                raise


def _unencodable(src):
    """None, or where ``src`` holds a lone surrogate (JSON's "\\ud800"), which no encoder of text can write."""
    try:
        src.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate U+{ord(src[exc.start]):04X} at character {exc.start}"
    return None
