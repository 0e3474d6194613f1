"""The server's models: the configuration file, loading at start-up or on first use, unloading after an idle
timeout, and the batching worker of each model.

Configuration (JSON, OpenNMT-py's ``conf.json`` shape)::

    {"models_root": "runs",
     "models": [{"id": 100, "model": "fr-en/model_best.pt", "load": true, "timeout": 600,
                 "opt": {"beam_size": 5, "block_ngram_repeat": 3}}]}

``model`` is read under ``models_root`` (the configuration file's folder by default): a checkpoint, or a
directory onmt_cont_convert wrote (decoded by CTranslate2; ``"opt": {"engine": "ctranslate2"}`` says so too);
``opt`` holds ``onmt_cont.load()``'s keywords (translate.py's flag names work too); ``timeout`` (seconds, -1: never)
unloads a model idle that long; ``load`` false loads it on its first request. A request names a model only by
its id: no request can make the server read another file."""

import json
import os
import threading
import time
from concurrent.futures import Future

from onmt_cont.api import load
from onmt_cont.translate.ct2 import is_export
from onmt_cont.utils.errors import UserError

MAX_BATCH = 64  # sentences translated as one batch at most
BATCH_WAIT_S = 0.01  # how long a batch waits for more requests to join it


def read_config(path):
    """The configuration file -> {id: ModelEntry}; every error names the file and the entry."""
    try:
        with open(path, encoding="utf-8") as f:
            conf = json.load(f)
    except OSError as exc:
        raise UserError(f"-config {path}: cannot read it ({(exc.strerror or str(exc)).lower()})") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"-config {path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(conf, dict) or not isinstance(conf.get("models"), list) or not conf["models"]:
        raise UserError(f"-config {path}: expected {{\"models\": [{{\"id\": N, \"model\": \"PATH\"}}, ...]}}")
    root = conf.get("models_root", os.path.dirname(os.path.abspath(path)))
    if not isinstance(root, str):
        raise UserError(f"-config {path}: models_root must be a folder's path")
    root = os.path.join(os.path.dirname(os.path.abspath(path)), root)
    entries = {}
    for i, m in enumerate(conf["models"]):
        where = f"-config {path}, models[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("model"), str):
            raise UserError(f"{where}: expected {{\"id\": N, \"model\": \"PATH\", ...}}")
        mid = m.get("id", i)
        if not isinstance(mid, int) or isinstance(mid, bool) or mid in entries:
            raise UserError(f"{where}: \"id\" must be an integer of its own, got {mid!r}")
        opt = m.get("opt", {})
        timeout = m.get("timeout", -1)
        if not isinstance(opt, dict) or not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
            raise UserError(f"{where}: \"opt\" must be an object and \"timeout\" a number of seconds (-1: never)")
        unknown = set(m) - {"id", "model", "opt", "timeout", "load", "on_timeout", "name"}
        if unknown:
            raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        model = os.path.join(root, m["model"])
        if not (os.path.isfile(model) or is_export(model)):
            raise UserError(f"{where}: {model}: no such file (a checkpoint, or a directory onmt_cont_convert wrote)")
        entries[mid] = ModelEntry(mid, model, opt, float(timeout), bool(m.get("load", True)))
    return entries


class ModelEntry:
    """One configured model: loaded on demand, unloaded when idle, translating batches in a worker thread."""

    def __init__(self, mid, path, opt, timeout, preload):
        self.id, self.path, self.opt, self.timeout, self.preload = mid, path, opt, timeout, preload
        self.model, self.last_used = None, time.monotonic()
        self._lock = threading.Lock()  # loading and unloading
        self._queue, self._wake = [], threading.Condition()
        self.batches = self.sentences = 0  # translated so far (GET /health)
        self._worker = threading.Thread(target=self._work, name=f"model-{mid}", daemon=True)
        self._worker.start()

    def describe(self):
        return {"model_id": self.id, "model": os.path.basename(self.path), "opt": self.opt,
                "loaded": self.model is not None, "timeout": self.timeout}

    def ensure_loaded(self):
        with self._lock:
            if self.model is None:
                self.model = load(self.path, **self.opt)
            self.last_used = time.monotonic()
            return self.model

    def unload_if_idle(self, now):
        if self.timeout < 0 or self.model is None:
            return False
        with self._lock, self._wake:
            if self._queue or now - self.last_used < self.timeout:
                return False
            model, self.model = self.model, None
        model.close()
        return True

    def translate(self, sentences, n_best=1):
        """Queue ``sentences`` (strings) -> a Future of their [(translation, score), ...] lists, in order."""
        future = Future()
        with self._wake:
            self._queue.append((sentences, n_best, future))
            self._wake.notify()
        return future

    def _work(self):
        while True:
            with self._wake:
                while not self._queue:
                    self._wake.wait()
            time.sleep(BATCH_WAIT_S)  # let the requests that arrive together join one batch
            with self._wake:
                batch, size = [], 0
                while self._queue and (not batch or size + len(self._queue[0][0]) <= MAX_BATCH):
                    item = self._queue.pop(0)
                    if batch and item[1] != batch[0][1]:  # another -n_best: its own batch
                        self._queue.insert(0, item)
                        break
                    batch.append(item)
                    size += len(item[0])
            self._run(batch)

    def _run(self, batch):
        try:
            model = self.ensure_loaded()
            sentences = [s for item in batch for s in item[0]]
            hyps = model.translate(sentences, n_best=batch[0][1], with_score=True)
            self.batches, self.sentences = self.batches + 1, self.sentences + len(sentences)
            self.last_used = time.monotonic()
        except Exception as exc:  # every request of the batch gets the error
            for _, _, future in batch:
                future.set_exception(exc)
            return
        start = 0
        for sentences, _, future in batch:
            future.set_result(hyps[start:start + len(sentences)])
            start += len(sentences)
