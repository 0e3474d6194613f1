"""The server's models: loading at start-up or on first use, unloading after an idle timeout, and the batching
worker of each model. The configuration file that lists them is read by :mod:`onmt_cont.serve.config`."""

import os
import sys
import threading
import time
from concurrent.futures import Future

from onmt_cont.api import load
from onmt_cont.utils.errors import UserError, printable

MAX_BATCH = 64  # sentences translated as one batch at most
BATCH_CHARS = 4000  # characters of source in one batch at most (one sentence of any length always fits)
BATCH_WAIT_S = 0.01  # how long a batch waits for more requests to join it


class ModelUnavailable(Exception):
    """A model that cannot be loaded: its clients get a 503 naming the model's id; the details (paths, file
    contents) go to the server's log only (issue 77.5)."""

    def __init__(self, mid):
        super().__init__(f"model {mid} cannot be loaded (the server's log says why)")


class Job:
    """One request's sentences for one model: taken a few at a time, between other requests' (issue 77.7)."""

    def __init__(self, sentences, n_best, gone=None):
        self.sentences, self.n_best = sentences, n_best
        self.results, self.taken, self.left = [None] * len(sentences), 0, len(sentences)
        self.future, self.dropped = Future(), False
        self._gone = gone  # whether the client has hung up (waitress's client_disconnected), asked at each batch

    def is_dropped(self):
        if not self.dropped and self._gone is not None and self._gone():
            self.dropped = True
        return self.dropped

    def drop(self):
        """The client has gone or timed out: its sentences not yet translated are not translated."""
        self.dropped = True

    def fail(self, exc):
        if not self.future.done():
            self.future.set_exception(exc)
        self.dropped = True


class ModelEntry:
    """One configured model: loaded on demand, unloaded when idle, translating batches in a worker thread.

    Each batch takes sentences from the waiting requests in turn, one at a time, up to MAX_BATCH sentences and
    BATCH_CHARS characters: a one-sentence request waits for at most one batch, not for the whole of a long request
    before it. A batch that fails is retried request by request, so one client's bad input fails its own request
    only (issue 77.3)."""

    def __init__(self, mid, path, opt, timeout, preload, log=None, on_timeout="unload", n_best=1, report_align=False):
        self.id, self.path, self.opt, self.timeout, self.preload = mid, path, opt, timeout, preload
        self.on_timeout, self.n_best, self.report_align = on_timeout, n_best, report_align
        self._warned = False  # the model's input warning logged (_warn_once)
        self.model, self.last_used = None, time.monotonic()
        self._lock = threading.Lock()  # loading and unloading
        self._queue, self._wake = [], threading.Condition()
        self.batches = self.sentences = self.dropped = 0  # translated so far, skipped for gone clients (GET /health)
        self._log = log or (
            lambda message: print(f"onmt_cont_server: {printable(message)}", file=sys.stderr, flush=True)
        )
        self._worker = threading.Thread(target=self._work, name=f"model-{mid}", daemon=True)
        self._worker.start()

    def describe(self):
        opt = {
            k: (os.path.basename(v) if isinstance(v, str) and os.sep in v else v)
            for k, v in self.opt.items()
            if k != "ensemble"
        }  # no server path in an answer
        return {
            "model_id": self.id,
            "model": os.path.basename(self.path),
            "opt": opt,
            "loaded": self.model is not None,
            "timeout": self.timeout,
            "on_timeout": self.on_timeout,
            "device": self.device,
        }

    @property
    def device(self):
        device = self.opt.get("device")
        if device is None and self.opt.get("gpu") is not None:
            device = "cpu" if self.opt["gpu"] < 0 else f"cuda:{self.opt['gpu']}"
        return device or "cpu"

    def unload(self):
        """GET /unload_model: free the model now; the next request loads it again."""
        with self._lock:
            model, self.model = self.model, None
        if model is not None:
            model.close()

    def move(self, device):
        """GET /to_cpu, /to_gpu: load the model on ``device`` ("cpu", "cuda"); on failure it stays where it was."""
        opt = {k: v for k, v in self.opt.items() if k != "gpu"}
        opt["device"] = device
        with self._lock:
            model = load(self.path, **opt)  # a UserError (no GPU here) leaves everything as it was
            old, self.model, self.opt = self.model, model, opt
            self.last_used = time.monotonic()
        if old is not None:
            old.close()

    def clone(self, mid, opt, timeout):
        """POST /clone_model: a new entry of the same model with ``opt`` over this one's, loaded now."""
        entry = ModelEntry(
            mid,
            self.path,
            {**self.opt, **opt},
            timeout,
            True,
            self._log,
            self.on_timeout,
            self.n_best,
            self.report_align,
        )
        entry.load_at_start()
        return entry

    def ensure_loaded(self):
        """The loaded model; a failure is logged with its details and raised as ModelUnavailable."""
        with self._lock:
            if self.model is None:
                try:
                    self.model = load(self.path, **self.opt)
                except Exception as exc:  # noqa: BLE001 - whatever went wrong, clients see only the id
                    self._log(f"model {self.id} cannot be loaded: {exc}")
                    raise ModelUnavailable(self.id) from None
            self.last_used = time.monotonic()
            return self.model

    def load_at_start(self):
        """At start-up: load a preloaded entry, and load then close a lazy one, so that a damaged file or a bad
        option stops the server in one line now, not a client later (issue 77.5)."""
        try:
            model = load(self.path, **self.opt)
        except UserError as exc:
            raise UserError(f"model {self.id}: {exc}") from None
        except (Exception, AssertionError) as exc:  # noqa: BLE001 - the operator's console: say what it was
            raise UserError(f"model {self.id}: cannot be loaded: {type(exc).__name__}: {exc}") from None
        if self.preload:
            self.model, self.last_used = model, time.monotonic()
        else:
            model.close()

    def unload_if_idle(self, now):
        """After ``timeout`` idle seconds: unload, or with "on_timeout": "to_cpu" move a GPU model to the CPU
        (OpenNMT-py's two choices; a CPU model then stays loaded). Returns what was done, or None."""
        if self.timeout < 0 or self.model is None or (self.on_timeout == "to_cpu" and self.device == "cpu"):
            return None
        with self._wake:
            if self._queue or now - self.last_used < self.timeout:
                return None
        if self.on_timeout == "to_cpu":
            self.move("cpu")
            return "moved to the CPU"
        with self._lock, self._wake:
            if self._queue or now - self.last_used < self.timeout:
                return None
            model, self.model = self.model, None
        model.close()
        return "unloaded"

    def translate(self, sentences, n_best=1, gone=None):
        """Queue ``sentences`` (strings) -> a Job whose ``future`` gives their [(translation, score), ...] lists.
        ``gone``: a function that says whether the client has hung up: its sentences are then skipped."""
        job = Job(sentences, n_best, gone)
        with self._wake:
            self._queue.append(job)
            self._wake.notify()
        return job

    def _next_batch(self):
        """Sentences from the waiting jobs of the oldest job's n_best, in turn -> [(job, index, sentence)]."""
        with self._wake:
            for job in [j for j in self._queue if j.is_dropped()]:
                self.dropped += len(job.sentences) - job.taken
                self._queue.remove(job)
            if not self._queue:
                return []
            n_best = self._queue[0].n_best
            jobs = [j for j in self._queue if j.n_best == n_best]
            batch, chars = [], 0
            while jobs and len(batch) < MAX_BATCH:
                for job in list(jobs):
                    src = job.sentences[job.taken]
                    if batch and (len(batch) == MAX_BATCH or chars + len(src) > BATCH_CHARS):
                        return batch
                    batch.append((job, job.taken, src))
                    chars += len(src)
                    job.taken += 1
                    if job.taken == len(job.sentences):
                        jobs.remove(job)
                        self._queue.remove(job)
            return batch

    def _work(self):
        while True:
            with self._wake:
                while not self._queue:
                    self._wake.wait()
            time.sleep(BATCH_WAIT_S)  # let the requests that arrive together join one batch
            batch = self._next_batch()
            if batch:
                self._run(batch)

    def _run(self, batch):
        try:
            model = self.ensure_loaded()
        except ModelUnavailable as exc:
            for job in {id(j): j for j, _, _ in batch}.values():
                job.fail(exc)
            return
        jobs = {}
        for job, i, src in batch:
            jobs.setdefault(id(job), (job, []))[1].append((i, src))
        if len(jobs) == 1:
            self._run_alone(model, *next(iter(jobs.values())))
            return
        try:
            hyps = model.translate(
                [src for _, _, src in batch], n_best=batch[0][0].n_best, with_score=True, report_align=self.report_align
            )
        except Exception:  # noqa: BLE001 - one request's bad input: retry each request alone (issue 77.3)
            for job, part in jobs.values():
                self._run_alone(model, job, part)
            return
        self._warn_once(model)
        for (job, i, _), h in zip(batch, hyps, strict=True):
            self._finish(job, i, h)
        self.batches, self.sentences = self.batches + 1, self.sentences + len(batch)
        self.last_used = time.monotonic()

    def _warn_once(self, model):
        """A model's warning about its input (raw text to a model of tokens), logged once: the answers carry none."""
        if getattr(model, "input_warning", None) and not self._warned:
            self._warned = True
            self._log(f"warning: model {self.id}: {model.input_warning}")

    def _run_alone(self, model, job, part):
        try:
            hyps = model.translate(
                [src for _, src in part], n_best=job.n_best, with_score=True, report_align=self.report_align
            )
        except UserError as exc:
            job.fail(exc)
            return
        except Exception as exc:  # noqa: BLE001 - logged here; the client gets a 500 that names no file
            self._log(f"model {self.id} failed on a request: {type(exc).__name__}: {exc}")
            job.fail(TranslationFailed(self.id))
            return
        self._warn_once(model)
        for (i, _), h in zip(part, hyps, strict=True):
            self._finish(job, i, h)
        self.batches, self.sentences = self.batches + 1, self.sentences + len(part)
        self.last_used = time.monotonic()

    @staticmethod
    def _finish(job, i, hyps):
        job.results[i] = hyps
        job.left -= 1
        if job.left == 0 and not job.future.done():
            job.future.set_result(job.results)


class TranslationFailed(Exception):
    def __init__(self, mid):
        super().__init__(f"model {mid} failed on this request (the server's log says why)")
