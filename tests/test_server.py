"""onmt_cont_server over a real HTTP socket on localhost (issue 71.1): OpenNMT-py's JSON API, the answers of
onmt_cont.load() for the same options, batching of requests that arrive together, lazy loading and idle
unloading, every bad request a JSON error with the server still up, and a clean stop on SIGTERM."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import onmt_cont
from tests.test_outputs import sample_data, trained

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
SENTENCES = [line.strip() for line in open(DATA / "test.fr", encoding="utf-8").readlines()[:20]]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("server")
    return trained(sample_data(d), str(d / "ce"), "-loss", "ce", "-train_steps", "20", "-rnn_size", "16",
                   "-word_vec_size", "16")


class Server:
    def __init__(self, conf_path, *args):
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "onmt_cont" / "bin" / "server.py"), "-config",
                                      str(conf_path), "-port", "0", "-threads", "1", *args],
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        match = re.search(r"http://([\d.]+):(\d+)(\S*)", line)
        assert match, line + self.proc.stderr.read()
        self.url = f"http://{match.group(1)}:{match.group(2)}"

    def call(self, path, body=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method="POST" if data is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=120) as res:
                return res.status, json.loads(res.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def config(tmp_path, model, **entry):
    path = tmp_path / "conf.json"
    path.write_text(json.dumps({"models_root": os.path.dirname(model), "models": [
        {"id": 100, "model": os.path.basename(model), "opt": {"beam_size": 2}, **entry}]}), encoding="utf-8")
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
        assert all(results[i] == (200, [[{"src": SENTENCES[i], "tgt": expected[i][0][0], "n_best": 1,
                                          "pred_score": results[i][1][0][0]["pred_score"]}]]) for i in range(16))
        _, health = server.call("/health")
        counts = health["models"]["100"]
        assert counts["sentences"] == len(SENTENCES) + 2 + 16 and counts["batches"] < counts["sentences"]
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("body,status,needle", [
    (b"not json", 400, "not JSON"),
    (b"{}", 400, "non-empty list"),
    (b"[]", 400, "non-empty list"),
    (json.dumps([{"src": "x", "id": 7}]).encode(), 404, "no model with id 7"),
    (json.dumps([{"src": "x", "id": "../../etc/passwd"}]).encode(), 404, "no model with id"),
    (json.dumps([{"src": 3, "id": 100}]).encode(), 400, "expected {\"src\""),
    (json.dumps([{"src": "a\nb", "id": 100}]).encode(), 400, "line break"),
    (json.dumps([{"src": "x", "id": 100, "n_best": 0}]).encode(), 400, "n_best"),
    (json.dumps([{"src": "x", "id": 100, "n_best": 5}]).encode(), 400, "-n_best 5"),
    (json.dumps([{"src": "x" * 100_001, "id": 100}]).encode(), 413, "at most 100,000"),
    (json.dumps([{"src": "x", "id": 100}] * 1001).encode(), 413, "at most 1000"),
    # issue 77.11: was a RecursionError and a 500 (an id of its own: PYTEST_CURRENT_TEST would hold the body)
    pytest.param(b"[" * 100_000 + b"]" * 100_000, 400, "not JSON", id="nested-brackets"),
])
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
    res = subprocess.run([sys.executable, str(ROOT / "onmt_cont" / "bin" / "server.py"), "-config", str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "missing.pt: no such file" in res.stderr
    bad.write_text("{", encoding="utf-8")
    res = subprocess.run([sys.executable, str(ROOT / "onmt_cont" / "bin" / "server.py"), "-config", str(bad)],
                         capture_output=True, text=True, timeout=120)
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
            s.sendall(b"POST /translator/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n[{\"src\"")
        body = json.dumps([{"src": s, "id": 100} for s in SENTENCES * 20]).encode()
        with socket.create_connection((host, int(port)), timeout=10) as s:  # a whole request, gone before the answer
            s.sendall(b"POST /translator/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
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

    both = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 5000, 0, 0)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 5000))]
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
