"""One translate run of either toolkit, with its translation loop timed inside the process.

    python lab/bench/decode_timer.py TIMES.json onmt_cont translate.py ARGS...
    python lab/bench/decode_timer.py TIMES.json opennmt-py ARGS...
    python lab/bench/decode_timer.py TIMES.json ctranslate2 MODEL_DIR SRC OUTPUT BEAM BATCH [BLOCK]

Runs our translate.py or OpenNMT-py's onmt_translate with ARGS as its own command line would, or
(ctranslate2) a plain CTranslate2 loop over a model OpenNMT-py's converter wrote (ct2-opennmt-py-converter:
the way OpenNMT-py users deploy), and writes to TIMES.json the wall-clock and CPU seconds spent in its
translation loop: ours `Translator.translate_lines` (sources split, batched, searched, words joined; also
under -engine ctranslate2), OpenNMT-py's `Inference._translate` (its examples read and transformed, batched,
searched, written), CTranslate2's lines read, `translate_batch` (which sorts them by length and batches them)
and the words written. Model
loading, imports and interpreter start-up are outside all of them, so these are the seconds "net of
start-up" without taking the difference of two noisy whole-process runs (lab/bench/peer_decode.py).
"""

import atexit
import json
import runpy
import sys
import time


def timed(owner, name, totals):
    """Wrap owner.name so that each call adds its wall and CPU seconds to ``totals``."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            totals["wall"] += time.perf_counter() - wall
            totals["cpu"] += time.process_time() - cpu
            totals["calls"] += 1

    setattr(owner, name, wrapper)


def main(argv):
    if len(argv) < 2 or argv[1] not in ("onmt_cont", "opennmt-py", "ctranslate2"):
        sys.exit("usage: decode_timer.py TIMES.json onmt_cont|opennmt-py|ctranslate2 ARGS...")
    out, tool, rest = argv[0], argv[1], argv[2:]
    totals = {"wall": 0.0, "cpu": 0.0, "calls": 0}

    def write():
        with open(out, "w", encoding="utf-8") as f:
            json.dump(totals, f)

    if tool == "ctranslate2":
        ct2_loop(*rest, totals=totals)
        write()
    elif tool == "onmt_cont":
        from onmt_cont.translate.translator import Translator

        timed(Translator, "translate_lines", totals)
        atexit.register(write)
        sys.argv = rest
        runpy.run_path(rest[0], run_name="__main__")
    else:
        from onmt.bin.translate import main as onmt_main
        from onmt.translate.translator import Inference

        timed(Inference, "_translate", totals)
        atexit.register(write)
        sys.argv = ["onmt_translate", *rest]
        onmt_main()


def ct2_loop(model, src, output, beam, batch, block="0", totals=None):
    """Translate ``src`` (tokens) with the CTranslate2 model ``model``, one thread, into ``output``."""
    import ctranslate2

    translator = ctranslate2.Translator(model, device="cpu", inter_threads=1, intra_threads=1)
    wall, cpu = time.perf_counter(), time.process_time()
    with open(src, encoding="utf-8") as f:
        lines = [line.split() for line in f]
    results = translator.translate_batch(
        lines, beam_size=int(beam), max_batch_size=int(batch), no_repeat_ngram_size=int(block)
    )
    with open(output, "w", encoding="utf-8") as f:
        f.writelines(" ".join(r.hypotheses[0]) + "\n" for r in results)
    totals["wall"] += time.perf_counter() - wall
    totals["cpu"] += time.process_time() - cpu
    totals["calls"] += 1


if __name__ == "__main__":
    main(sys.argv[1:])
