"""onmt_cont_server over a real HTTP socket on localhost (issue 71.1): OpenNMT-py's JSON API, the answers of
onmt_cont.load() for the same options, batching of requests that arrive together, lazy loading and idle
unloading, every bad request a JSON error with the server still up, and a clean stop on SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import onmt_cont
from tests.helpers import ROOT, Server, sample_data, trained

DATA = ROOT / "data"
SENTENCES = [line.strip() for line in open(DATA / "test.fr", encoding="utf-8").readlines()[:20]]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("server")
    return trained(
        sample_data(d), str(d / "ce"), "-loss", "ce", "-train_steps", "20", "-rnn_size", "16", "-word_vec_size", "16"
    )


def config(tmp_path, model, **entry):
    path = tmp_path / "conf.json"
    path.write_text(
        json.dumps(
            {
                "models_root": os.path.dirname(model),
                "models": [{"id": 100, "model": os.path.basename(model), "opt": {"beam_size": 2}, **entry}],
            }
        ),
        encoding="utf-8",
    )
    return path


def test_the_api_answers_as_onmt_cont_load(model, tmp_path):
    server = Server(config(tmp_path, model))
    try:
        status, models = server.call("/translator/models")
        assert status == 200 and models[0]["model_id"] == 100 and models[0]["loaded"] is True
        status, out = server.call("/translator/translate", [{"src": s, "id": 100} for s in SENTENCES])
        assert status == 200 and len(out) == 1 and len(out[0]) == len(SENTENCES)
        with onmt_cont.load(model, beam_size=2) as m:
            expected = m.translate(SENTENCES, with_score=True)
        assert [h["tgt"] for h in out[0]] == [hyps[0][0] for hyps in expected]
        assert [h["src"] for h in out[0]] == SENTENCES and all(h["n_best"] == 1 for h in out[0])
        assert [round(h["pred_score"], 4) for h in out[0]] == [round(hyps[0][1], 4) for hyps in expected]
        # issue 79: OpenNMT-py's answer, one list per rank, "n_best" the count asked for
        status, out = server.call("/translator/translate", [{"src": s, "id": 100, "n_best": 2} for s in SENTENCES[:2]])
        assert status == 200 and len(out) == 2 and [len(rank) for rank in out] == [2, 2]
        assert [h["src"] for h in out[0]] == SENTENCES[:2] and all(h["n_best"] == 2 for rank in out for h in rank)
        with onmt_cont.load(model, beam_size=2) as m:
            two = m.translate(SENTENCES[:2], n_best=2)
        assert [[h["tgt"] for h in rank] for rank in out] == [[hyps[k][0] for hyps in two] for k in range(2)]
        # requests that arrive together are answered, each its own, and translated in fewer batches
        results = {}

        def ask(i):
            results[i] = server.call("/translator/translate", [{"src": SENTENCES[i], "id": 100}])

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(
            results[i]
            == (
                200,
                [
                    [
                        {
                            "src": SENTENCES[i],
                            "tgt": expected[i][0][0],
                            "n_best": 1,
                            "pred_score": results[i][1][0][0]["pred_score"],
                        }
                    ]
                ],
            )
            for i in range(16)
        )
        _, health = server.call("/health")
        counts = health["models"]["100"]
        assert counts["sentences"] == len(SENTENCES) + 2 + 16 and counts["batches"] < counts["sentences"]
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize(
    "body,status,needle",
    [
        (b"not json", 400, "not JSON"),
        (b"{}", 400, "non-empty list"),
        (b"[]", 400, "non-empty list"),
        (json.dumps([{"src": "x", "id": 7}]).encode(), 404, "no model with id 7"),
        (json.dumps([{"src": "x", "id": "../../etc/passwd"}]).encode(), 404, "no model with id"),
        (json.dumps([{"src": 3, "id": 100}]).encode(), 400, 'expected {"src"'),
        (json.dumps([{"src": "a\nb", "id": 100}]).encode(), 400, "line break"),
        (json.dumps([{"src": "x", "id": 100, "n_best": 0}]).encode(), 400, "n_best"),
        (json.dumps([{"src": "x", "id": 100, "n_best": 5}]).encode(), 400, "-n_best 5"),
        (json.dumps([{"src": "x" * 100_001, "id": 100}]).encode(), 413, "at most 100,000"),
        (json.dumps([{"src": "x", "id": 100}] * 1001).encode(), 413, "at most 1000"),
        # issue 77.11: was a RecursionError and a 500 (an id of its own: PYTEST_CURRENT_TEST would hold the body)
        pytest.param(b"[" * 100_000 + b"]" * 100_000, 400, "not JSON", id="nested-brackets"),
    ],
)
def test_bad_requests_get_a_json_error_and_the_server_stays_up(model, tmp_path, body, status, needle):
    server = Server(config(tmp_path, model))
    try:
        got, answer = server.call("/translator/translate", raw=body)
        assert got == status and needle in answer["error"], answer
        assert server.call("/nope")[0] == 404
        assert server.call("/translator/translate", [{"src": "un chien .", "id": 100}])[0] == 200  # still up
    finally:
        assert server.stop() == 0


def test_lazy_loading_idle_unloading_and_a_stop_with_a_request_in_flight(model, tmp_path):
    server = Server(config(tmp_path, model, load=False, timeout=1))
    try:
        assert server.call("/translator/models")[1][0]["loaded"] is False
        assert server.call("/translator/translate", [{"src": "un chien .", "id": 100}])[0] == 200
        assert server.call("/translator/models")[1][0]["loaded"] is True
        deadline = time.monotonic() + 30
        while server.call("/translator/models")[1][0]["loaded"] and time.monotonic() < deadline:
            time.sleep(0.3)
        assert server.call("/translator/models")[1][0]["loaded"] is False  # unloaded after 1 s idle
        assert server.call("/translator/translate", [{"src": "un chien .", "id": 100}])[0] == 200  # loaded again
        answer = {}
        many = [{"src": s, "id": 100} for s in SENTENCES * 10]
        t = threading.Thread(target=lambda: answer.update(r=server.call("/translator/translate", many)))
        t.start()
        time.sleep(0.3)
    finally:
        assert server.stop() == 0  # SIGTERM: the request in flight is answered first
    t.join(timeout=60)
    assert answer["r"][0] == 200 and len(answer["r"][1][0]) == len(many)


def test_a_bad_configuration_is_refused_at_start(tmp_path, model):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": [{"id": 1, "model": "missing.pt"}]}), encoding="utf-8")
    res = subprocess.run(
        [sys.executable, str(ROOT / "onmt_cont" / "bin" / "server.py"), "-config", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "missing.pt: no such file" in res.stderr
    bad.write_text("{", encoding="utf-8")
    res = subprocess.run(
        [sys.executable, str(ROOT / "onmt_cont" / "bin" / "server.py"), "-config", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "not JSON" in res.stderr


def test_the_load_benchmark_runs_bounded_and_counts_no_error(model, capsys):
    from lab.bench import server_load

    assert server_load.main(["-model", model, "-requests", "6", "-levels", "1,3", "-time_limit", "120"]) == 0
    out = capsys.readouterr().out
    assert "| server, 3 client(s) |" in out and out.count("| 0 |") == 4


def test_a_client_that_disconnects_leaves_the_server_up(model, tmp_path):
    """A client that sends half a request and goes, or goes before its answer, costs nothing but its own answer."""
    import socket

    server = Server(config(tmp_path, model))
    try:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:  # half a request, then gone
            s.sendall(b'POST /translator/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n[{"src"')
        body = json.dumps([{"src": s, "id": 100} for s in SENTENCES * 20]).encode()
        with socket.create_connection((host, int(port)), timeout=10) as s:  # a whole request, gone before the answer
            s.sendall(
                b"POST /translator/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        time.sleep(0.5)
        assert server.call("/translator/translate", [{"src": "un chien .", "id": 100}])[0] == 200
        assert server.call("/health")[1]["status"] == "ok"
    finally:
        assert server.stop() == 0


def test_a_host_of_several_addresses_is_refused_in_one_line(monkeypatch):
    """Issue 77.9: -host localhost where localhost is ::1 and 127.0.0.1 (Debian's and Ubuntu's /etc/hosts) crashed
    with waitress's MultiSocketServer; an unknown name is one line too."""
    import socket

    from onmt_cont.bin import server
    from onmt_cont.utils.errors import UserError

    both = [
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 5000, 0, 0)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 5000)),
    ]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: both)
    with pytest.raises(UserError, match=r"-host localhost names 2 addresses \(127.0.0.1, ::1\): give one of them"):
        server._one_address("localhost", 5000)
    monkeypatch.undo()
    server._one_address("127.0.0.1", 5000)
    with pytest.raises(UserError, match="-host no-such-host.invalid: cannot resolve it"):
        server._one_address("no-such-host.invalid", 5000)


def test_the_url_root_is_printed_as_it_is_served():
    """Issue 77.17: -url_root a/b printed http://127.0.0.1:5000a/b; create_app serves /a/b."""
    from onmt_cont.bin.server import url_path

    assert [url_path(r) for r in ("a/b", "/a/b/", "/translator", "/", "")] == ["/a/b", "/a/b", "/translator", "", ""]


class FakeModel:
    """Upper-cases each sentence; a sentence holding BAD fails its batch as a 3,000-token input fails an export's,
    CRASH as an unexpected error would. Records every batch it is given."""

    def __init__(self):
        self.batches = []

    def translate(self, sentences, n_best=1, with_score=True, report_align=False):
        from onmt_cont.utils.errors import UserError

        self.batches.append(list(sentences))
        if any("BAD" in s for s in sentences):
            raise UserError("a source sentence of 3000 tokens: the exported model has position vectors for 2048")
        if any("CRASH" in s for s in sentences):
            raise RuntimeError("/secret/path/model.bin: damaged")
        return [[(s.upper(), -1.0)] for s in sentences]

    def close(self):
        pass


def _entry(log):
    from onmt_cont.serve.models import ModelEntry

    entry = ModelEntry(1, "unused.pt", {}, -1.0, True, log=log.append)
    entry.model = FakeModel()
    return entry


def test_one_clients_bad_input_fails_only_its_own_request():
    """Issue 77.3: a bad input failed every request batched with it, 10 of 10 times. A failed batch is retried
    request by request: the bad one gets its own error, the others their translations."""
    from onmt_cont.serve.models import TranslationFailed
    from onmt_cont.utils.errors import UserError

    log = []
    entry = _entry(log)
    with entry._wake:  # all four queued before the worker looks: one batch
        jobs = [
            entry.translate(["a", "b"]),
            entry.translate(["BAD"]),
            entry.translate(["c"]),
            entry.translate(["CRASH"]),
        ]
    assert jobs[0].future.result(timeout=10) == [[("A", -1.0)], [("B", -1.0)]]
    assert jobs[2].future.result(timeout=10) == [[("C", -1.0)]]
    with pytest.raises(UserError, match="3000 tokens"):
        jobs[1].future.result(timeout=10)
    with pytest.raises(TranslationFailed, match=r"^model 1 failed on this request \(the server's log says why\)$"):
        jobs[3].future.result(timeout=10)
    assert entry.model.batches[0] == ["a", "BAD", "c", "CRASH", "b"]  # in turn: one sentence of each request
    assert any("/secret/path/model.bin" in line for line in log)  # the details in the log, not in the answer


def test_a_short_request_is_not_held_behind_a_long_one_and_dropped_work_is_skipped():
    """Issue 77.7: a one-sentence request waited 29 s behind 32 long sentences of another client, and requests
    whose clients had gone were still translated. Batches take the waiting requests' sentences in turn, up to
    BATCH_CHARS characters; a dropped request's sentences are not translated."""
    from onmt_cont.serve.models import BATCH_CHARS

    entry = _entry([])
    with entry._wake:
        long = entry.translate(["x" * (BATCH_CHARS // 2)] * 32)
        short = entry.translate(["a dog ."])
        gone = entry.translate(["y"] * 500)
        gone.drop()
    assert short.future.result(timeout=10) == [[("A DOG .", -1.0)]]
    assert len(long.future.result(timeout=10)) == 32
    batches = entry.model.batches
    assert "a dog ." in batches[0] and max(len(b) for b in batches) <= 2  # never more than BATCH_CHARS in one
    assert not any("y" in b for b in batches) and entry.dropped == 500


def _raw(server, request, read=True):
    import socket

    host, port = server.url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=20)
    s.sendall(request)
    if not read:
        return s
    with s:
        return s.recv(4096).decode("latin-1")


def test_the_server_holds_against_one_hostile_client(model, tmp_path):
    """Issue 77.3, 77.4, 77.6, 77.7, 77.10: an unencodable input is a 400 of its own; an oversized Content-Length
    is a 413 before the body is read; idle connections beyond -connection_limit are closed after
    -connection_timeout; /health answers while the only worker translates; a client that hangs up has its
    sentences dropped; a stop during a request leaves no traceback."""
    server = Server(config(tmp_path, model), "-workers", "1", "-connection_limit", "5", "-connection_timeout", "1")
    try:
        status, body = server.call("/translator/translate", raw=b'[{"src": "un \\ud800 chien", "id": 100}]')
        assert status == 400 and body == {
            "status": "error",
            "error": "input 0: not Unicode text: a lone surrogate U+D800 at character 3",
        }
        start = time.monotonic()
        head = _raw(
            server,
            b"POST /translator/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 300000000\r\n\r\n[{",
        )
        assert head.startswith("HTTP/1.1 413") and time.monotonic() - start < 5
        idle = [
            _raw(server, b"POST /translator/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\n[", read=False)
            for _ in range(8)
        ]  # more half-sent requests than -connection_limit
        start = time.monotonic()
        assert server.call("/health")[0] == 200 and time.monotonic() - start < 10
        for s in idle:
            s.close()
        answer = {}
        many = [{"src": s, "id": 100} for s in SENTENCES * 40]
        t = threading.Thread(target=lambda: answer.update(r=server.call("/translator/translate", many)))
        t.start()
        time.sleep(0.5)
        start = time.monotonic()
        status, health = server.call("/translator/health")  # the only worker is busy with the 800 sentences
        assert status == 200 and time.monotonic() - start < 2 and t.is_alive()
        t.join(timeout=300)
        assert answer["r"][0] == 200 and len(answer["r"][1][0]) == len(many)
        body = json.dumps(many).encode()
        s = _raw(
            server,
            b"POST /translator/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body,
            read=False,
        )
        time.sleep(0.3)
        s.close()  # gone before its answer
        deadline = time.monotonic() + 60
        while server.call("/health")[1]["models"]["100"]["dropped"] == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.call("/health")[1]["models"]["100"]["dropped"] > 0
        t = threading.Thread(target=lambda: answer.update(r=server.call("/translator/translate", many)))
        t.start()
        time.sleep(0.5)
    finally:
        assert server.stop() == 0  # during a request
    t.join(timeout=300)
    log = server.proc.stderr.read()
    assert "Traceback" not in log and "Bad file descriptor" not in log, log


def test_a_second_signal_stops_a_draining_server_at_once(model, tmp_path):
    """Issue 77.8: a second Ctrl-C waited up to -request_timeout for the requests in flight."""
    server = Server(config(tmp_path, model))
    many = [{"src": s, "id": 100} for s in SENTENCES * 50]

    def call():
        try:
            server.call("/translator/translate", many)
        except OSError:  # the server stops without answering: that is the point
            pass

    t = threading.Thread(target=call, daemon=True)
    t.start()
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    start = time.monotonic()
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(timeout=30) == 130 and time.monotonic() - start < 5
    assert "stopped without waiting" in server.proc.stderr.read()


def test_models_are_checked_at_start_and_a_later_load_failure_names_no_file(model, tmp_path):
    """Issue 77.5: a lazy model with a damaged file answered every request with the checkpoint's absolute path
    (a mistyped lexicon with the file's first line). Every entry is loaded at start-up; a load that fails later is
    a 503 naming the model's id, the details in the server's log."""
    import shutil

    bad = tmp_path / "damaged.pt"
    bad.write_bytes(b"API_KEY=secret\n")
    conf = tmp_path / "conf.json"
    conf.write_text(json.dumps({"models": [{"id": 1, "model": str(bad), "load": False}]}), encoding="utf-8")
    res = subprocess.run(
        [sys.executable, str(ROOT / "onmt_cont" / "bin" / "server.py"), "-config", str(conf)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and res.stderr.startswith("error: model 1: ") and res.stderr.count("\n") == 1
    copy = tmp_path / "copy.pt"
    shutil.copy(model, copy)
    conf.write_text(
        json.dumps(
            {
                "models": [
                    {"id": 1, "model": str(copy), "load": False, "opt": {"lexicon": str(tmp_path / "lexicon.txt")}}
                ]
            }
        ),
        encoding="utf-8",
    )
    (tmp_path / "lexicon.txt").write_text("un a\n", encoding="utf-8")
    server = Server(conf)
    try:
        (tmp_path / "lexicon.txt").write_text("API_KEY=secret\n", encoding="utf-8")  # damaged after the start
        status, body = server.call("/translator/translate", [{"src": "un chien .", "id": 1}])
        assert status == 503 and body["error"] == "model 1 cannot be loaded (the server's log says why)"
        assert str(tmp_path) not in json.dumps(body) and "API_KEY" not in json.dumps(body)
    finally:
        assert server.stop() == 0
    assert "model 1 cannot be loaded" in server.proc.stderr.read()


@pytest.mark.parametrize(
    "conf, needle",
    [
        (b'{"models": [{"id": 1, "model": "m.pt"}]}\xff', "not UTF-8 text"),
        (b'{"models": [{"id": 1, "model": "MODEL", "opt": {"src_lang": 5}}]}', "model 1: onmt_cont.load(): src_lang"),
        (b'{"models": [{"id": 1, "model": "MODEL", "opt": {"device": "vulkan"}}]}', "model 1: device must be"),
        (
            b'{"models": [{"id": 1, "model": "MODEL", "opt": {"gpu": 0}}]}'
            if not __import__("torch").cuda.is_available()
            else b"[",
            "CUDA is not available" if not __import__("torch").cuda.is_available() else "expected",
        ),
    ],
)
def test_configuration_values_of_the_wrong_type_are_one_line(model, tmp_path, conf, needle):
    """Issue 77.11: a non-UTF-8 configuration, "src_lang": 5 and a CUDA device on a CPU-only torch ended in
    tracebacks at start-up."""
    path = tmp_path / "conf.json"
    path.write_bytes(conf.replace(b"MODEL", str(model).encode()))
    res = subprocess.run(
        [sys.executable, str(ROOT / "onmt_cont" / "bin" / "server.py"), "-config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and needle in res.stderr and res.stderr.count("\n") == 1, res.stderr


def test_ctrl_c_while_the_models_load_is_one_line(model, tmp_path, monkeypatch, capsys):
    """Issue 77.10: Ctrl-C while the models loaded ended in a KeyboardInterrupt traceback."""
    from onmt_cont.bin import server
    from onmt_cont.serve.models import ModelEntry

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(ModelEntry, "load_at_start", interrupted)
    with pytest.raises(SystemExit) as exit_:
        server.main(["-config", str(config(tmp_path, model)), "-port", "0"])
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "onmt_cont_server: interrupted while loading the models\n"


def test_onmt_py_model_routes(model, tmp_path):
    """Issue 79: GET /translator/health, POST /translator/clone_model/ID, GET /translator/unload_model/ID,
    /translator/to_cpu/ID and /translator/to_gpu/ID answered 404. They answer OpenNMT-py's shapes now."""
    import torch

    server = Server(config(tmp_path, model))
    try:
        assert server.call("/translator/health") == (200, server.call("/health")[1])
        assert server.call("/translator/health")[1]["status"] == "ok"
        status, body = server.call("/translator/clone_model/100", {"opt": {"beam_size": 1}, "timeout": 5})
        assert status == 200 and body["status"] == "ok" and body["model_id"] == 101 and body["load_time"] >= 0
        models = {m["model_id"]: m for m in server.call("/translator/models")[1]}
        assert models[101]["opt"]["beam_size"] == 1 and models[100]["opt"]["beam_size"] == 2
        assert models[101]["timeout"] == 5 and models[101]["loaded"] is True
        assert server.call("/translator/translate", [{"src": "un chien .", "id": 101}])[0] == 200
        status, body = server.call("/translator/clone_model/100", {"opt": {"lexicon": "/etc/passwd"}})
        assert status == 400 and body["status"] == "error" and "lexicon name files or devices" in body["error"]
        assert server.call("/translator/clone_model/999", {})[0] == 404
        assert server.call("/translator/unload_model/100") == (200, {"status": "ok", "model_id": 100})
        assert {m["model_id"]: m["loaded"] for m in server.call("/translator/models")[1]}[100] is False
        assert server.call("/translator/translate", [{"src": "un chien .", "id": 100}])[0] == 200  # loaded again
        assert server.call("/translator/to_cpu/100") == (200, {"status": "ok", "model_id": 100})
        status, body = server.call("/translator/to_gpu/100")
        if torch.cuda.is_available():
            assert status == 200
        else:
            assert status == 400 and body["status"] == "error" and "CUDA is not available" in body["error"]
            assert server.call("/translator/translate", [{"src": "un chien .", "id": 100}])[0] == 200  # still there
        assert server.call("/translator/unload_model/7")[0] == 404
    finally:
        assert server.stop() == 0


def test_the_tokenizer_section_maps_to_each_side():
    from onmt_cont.serve.config import _tokenizer

    spm = {"type": "sentencepiece", "model": "sp.model"}
    assert _tokenizer(spm, "/r", "w") == {"src_spm": "/r/sp.model", "tgt_spm": "/r/sp.model"}
    assert _tokenizer({"src": spm}, "/r", "w") == {"src_spm": "/r/sp.model"}  # a target of words: source only


def test_onmt_py_configuration_keys(model, tmp_path):
    """Issue 79: "models": [A, B] (an ensemble), "opt": {"n_best": 2} and "tokenizer" were refused, "on_timeout":
    "to_cpu" taken and ignored, and there was no --ip. Now: the ensemble decodes, n_best is each request's default,
    "tokenizer" is honoured for SentencePiece and refused by name for pyonmttok, to_cpu keeps a CPU model loaded."""
    conf = tmp_path / "conf.json"
    conf.write_text(
        json.dumps(
            {
                "models_root": os.path.dirname(model),
                "models": [
                    {
                        "id": 1,
                        "models": [os.path.basename(model), os.path.basename(model)],
                        "opt": {"beam_size": 2, "n_best": 2},
                    },
                    {"id": 2, "model": os.path.basename(model), "timeout": 1, "on_timeout": "to_cpu"},
                ],
            }
        ),
        encoding="utf-8",
    )
    server = Server(conf)
    try:
        status, out = server.call("/translator/translate", [{"src": "un chien .", "id": 1}])
        assert status == 200 and len(out) == 2 and out[0][0]["n_best"] == 2  # the conf's n_best: two ranks
        with onmt_cont.load(model, beam_size=2, ensemble=[model], tokenized=True) as m:
            assert [r[0]["tgt"] for r in out] == [t for t, _ in m.translate(["un chien ."], n_best=2)[0]]
        assert (
            server.call("/translator/translate", [{"src": "un chien .", "id": 1, "n_best": 1}])[1][0][0]["n_best"] == 1
        )
        assert server.call("/translator/translate", [{"src": "un chien .", "id": 2}])[0] == 200
        time.sleep(2.5)
        assert {m["model_id"]: m["loaded"] for m in server.call("/translator/models")[1]}[2] is True  # on the CPU
    finally:
        assert server.stop() == 0
    for tokenizer, needle in (
        ({"type": "pyonmttok", "params": {}}, "pyonmttok is not supported"),
        ({"type": "sentencepiece", "model": "missing.model"}, "-src_spm"),
        ({"type": "bpe"}, '"tokenizer" must be'),
        ({"src": {"type": "pyonmttok"}}, "pyonmttok is not supported"),
        ({"src": {"type": "sentencepiece", "model": "missing.model"}}, "-src_spm"),
    ):
        conf.write_text(json.dumps({"models": [{"id": 1, "model": model, "tokenizer": tokenizer}]}), encoding="utf-8")
        res = subprocess.run(
            [
                sys.executable,
                str(ROOT / "onmt_cont" / "bin" / "server.py"),
                "--config",
                str(conf),
                "--ip",
                "127.0.0.1",
                "--port",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 2 and needle in res.stderr, res.stderr


def test_raw_text_to_a_model_of_tokens_is_logged_once(model, tmp_path):
    """Issue 79: raw text sent to a model of tokens came back as silent garbage; the server logs it once."""
    server = Server(config(tmp_path, model))
    try:
        for _ in range(2):
            assert (
                server.call(
                    "/translator/translate",
                    [
                        {"src": "Un chien court dans l'herbe.", "id": 100},
                        {"src": "Deux hommes, trois femmes.", "id": 100},
                    ],
                )[0]
                == 200
            )
    finally:
        assert server.stop() == 0
    log = server.proc.stderr.read()
    assert log.count("warning: model 100: onmt_cont.load(") == 1 and "punctuation stuck to words" in log, log
    assert "UserWarning" not in log


def test_report_align_gives_the_align_field(model, tmp_path):
    """Issue 79: OpenNMT-py's answers carry "align" when the model's opt has report_align; ours had no such field.
    The API's translate(report_align=True) gives the same alignments."""
    server = Server(config(tmp_path, model, opt={"beam_size": 2, "report_align": True}))
    try:
        status, out = server.call("/translator/translate", [{"src": "un chien court .", "id": 100, "n_best": 2}])
    finally:
        assert server.stop() == 0
    assert status == 200 and len(out) == 2 and all(len(r[0]["align"].split()) == len(r[0]["tgt"].split()) for r in out)
    with onmt_cont.load(model, beam_size=2) as m:
        hyps = m.translate(["un chien court ."], n_best=2, report_align=True)[0]
        assert [(t, a) for t, _, a in hyps] == [(r[0]["tgt"], r[0]["align"]) for r in out]
        ((text, align),) = m.translate(["un chien court ."], report_align=True)
        assert (text, align) == (hyps[0][0], hyps[0][2])
