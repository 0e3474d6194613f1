"""The benchmarks' FLOP model against hand counts, and their synthetic batches."""

import pytest
import torch

from lab.bench import benchlib, flops
from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID
from tests.helpers import ROOT

H, E, V, M, B, S = 8, 6, 50, 300, 3, 5


def tiny_options(*row):
    opt = benchlib.train_cli.build_parser().parse_args(
        ["-rnn_size", str(H), "-word_vec_size", str(E), "-brnn", "-dec_layers", "2", "-tgt_emb", "x", *row]
    )
    benchlib.check_options(opt)
    return opt


def hand_count(batch, generator_fwd):
    """3x the forward matmul FLOPs (forward, input gradient, weight gradient), counted by hand."""
    T = batch["tgt"].size(1) - 1
    per_step = (
        2 * 4 * H * (E + H + H)  # decoder layer 1: [embedding; input feed] and h
        + 2 * 4 * H * (H + H)  # decoder layer 2
        + 2 * H * H  # attention linear_in
        + 2 * 2 * S * H  # scores and context (bmm)
        + 2 * 2 * H * H  # attention linear_out
    )
    bridge = 2 * B * (2 * H) * (2 * 2 * H)
    n = int((batch["tgt"][:, 1:] != PAD_ID).sum())
    h = H // 2
    encoder = 2 * 2 * 4 * h * (E + h) * B * S
    return 3 * (B * T * per_step + bridge + n * generator_fwd + encoder)


@pytest.mark.parametrize(
    ("row", "generator_fwd"),
    [(["-loss", "ce"], 2 * H * V), (["-loss", "nllvmf"], 2 * H * M), (["-loss", "cosine"], 2 * H * M)],
)
def test_step_flops_match_a_hand_count(row, generator_fwd):
    batch = benchlib.synthetic_batch(B, V, V, "cpu", src_len=S)
    opt = tiny_options(*row)
    got = flops.step_flops(opt, V, V, batch, benchlib.needs_table(opt, V))["total"]
    assert got == hand_count(batch, generator_fwd)


def test_maxmargin_adds_its_no_grad_search_once():
    batch = benchlib.synthetic_batch(B, V, V, "cpu", src_len=S)
    n = int((batch["tgt"][:, 1:] != PAD_ID).sum())
    base = flops.step_flops(tiny_options("-loss", "cosine"), V, V, batch, True)["total"]
    mm = flops.step_flops(tiny_options("-loss", "maxmargin"), V, V, batch, True)["total"]
    # the search: (ê/‖ê‖ − e(w))·tableᵀ over rows 1.. (one product: cos(ê, e_j) − cos(e(w), e_j) is
    # linear in e_j), forward only; then cos(ê, e(w′)) of the chosen negative, forward and ê's gradient
    assert mm - base == 2 * n * M * (V - 1) + 2 * (2 * n * M)


def test_table_free_negatives_cost_their_candidates_only():
    """-negatives gold_nn: the same search over the gold word's 33 looked-up neighbours instead of
    the V − 1 words (faiss's own search, once before training, is not a torch FLOP)."""
    batch = benchlib.synthetic_batch(B, V, V, "cpu", src_len=S)
    n = int((batch["tgt"][:, 1:] != PAD_ID).sum())
    base = flops.step_flops(tiny_options("-loss", "cosine"), V, V, batch, True)["total"]
    mm = flops.step_flops(tiny_options("-loss", "maxmargin", "-negatives", "gold_nn"), V, V, batch, True)["total"]
    assert mm - base == 2 * n * M * 33 + 2 * (2 * n * M)


def test_synthetic_batch_is_a_length_bucket():
    batch = benchlib.synthetic_batch(16, 100, 200, "cpu", seed=3)
    tgt = batch["tgt"]
    assert batch["src"].shape == (16, benchlib.SRC_LEN) and (batch["src"] >= 4).all()
    assert (tgt[:, 0] == BOS_ID).all()
    lengths = (tgt != PAD_ID).sum(1) - 2
    assert (tgt[range(16), lengths + 1] == EOS_ID).all()
    assert tgt.size(1) == int(lengths.max()) + 2 and int(lengths.min()) >= 3


FF, LAYERS = 12, 2


def transformer_hand_count(batch, generator_fwd, tied=False):
    """3x the forward matmul FLOPs of a Transformer encoder and decoder (d = H, FF, LAYERS each),
    counted by hand; with -tie_emb the frozen table's 300 -> H projection gets no input gradient (2x)."""
    T = batch["tgt"].size(1) - 1
    n = int((batch["tgt"][:, 1:] != PAD_ID).sum())
    src, tgt = B * S, B * T
    attention = 2 * H * H * 4  # q, k, v and out projections per token (2·H·H each)
    encoder = LAYERS * (src * (attention + 2 * 2 * H * FF) + 2 * 2 * B * S * S * H)
    decoder = LAYERS * (
        tgt * (attention + 2 * 2 * H * FF)
        + 2 * 2 * B * T * T * H  # causal self-attention (full T x T)
        + tgt * 2 * 2 * H * H
        + src * 2 * 2 * H * H
        + 2 * 2 * B * T * S * H  # cross: q, out; k, v; scores
    )
    projection = 2 * tgt * M * H if tied else 0
    return 3 * (encoder + decoder + n * generator_fwd) + 2 * projection


@pytest.mark.parametrize(
    ("row", "generator_fwd", "tied"),
    [
        (["-loss", "ce"], 2 * H * V, False),
        (["-loss", "nllvmf"], 2 * H * M, False),
        (["-loss", "nllvmf", "-tie_emb"], 2 * H * M, True),
    ],
)
def test_transformer_step_flops_match_a_hand_count(row, generator_fwd, tied):
    parser = benchlib.train_cli.build_parser()
    opt = parser.parse_args(
        [
            "-encoder_type",
            "transformer",
            "-decoder_type",
            "transformer",
            "-rnn_size",
            str(H),
            "-word_vec_size",
            str(H),
            "-heads",
            "2",
            "-transformer_ff",
            str(FF),
            "-layers",
            str(LAYERS),
            "-tgt_emb",
            "x",
            *row,
        ]
    )
    benchlib.expand_layers(opt, parser.get_default)
    benchlib.check_options(opt)
    batch = benchlib.synthetic_batch(B, V, V, "cpu", src_len=S)
    got = flops.step_flops(opt, V, V, batch, benchlib.needs_table(opt, V))["total"]
    assert got == transformer_hand_count(batch, generator_fwd, tied)


def test_a_tiny_transformer_row_trains_in_the_worker(monkeypatch):
    """What lab/bench/train_speed.py's worker runs for the transformer size, at a tiny width: the row's
    options through train.py's checks, build_model, two timed updates, the parameter counts."""
    from lab.bench import train_worker

    tiny = [
        "-encoder_type",
        "transformer",
        "-decoder_type",
        "transformer",
        "-rnn_size",
        str(H),
        "-word_vec_size",
        str(H),
        "-heads",
        "2",
        "-transformer_ff",
        str(FF),
        "-layers",
        str(LAYERS),
        "-decay_method",
        "noam",
    ]
    monkeypatch.setitem(benchlib.SIZES, "tiny_transformer", tiny)
    assert "d_model 8, 2 heads, feed-forward 12, 2+2 layers" in benchlib.describe("tiny_transformer")
    counts = {}
    for label, row in (("ce", ["-loss", "ce"]), ("nllvmf tied", ["-loss", "nllvmf", "-tie_emb"])):
        cfg = {
            "size": "tiny_transformer",
            "row_args": row,
            "vocab": V,
            "gpu": None,
            "threads": 1,
            "seed": 1,
            "tgt_len_sd": 0.6,
        }
        model = train_worker.Model(cfg)
        assert model.opt.enc_layers == model.opt.dec_layers == LAYERS
        before = [p.detach().clone() for p in model.model.parameters() if p.requires_grad]
        times = [model.step(4) for _ in range(2)]
        assert all(t > 0 for t in times)
        after = [p for p in model.model.parameters() if p.requires_grad]
        assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))  # Adam moved them
        counts[label] = model.params()
    assert counts["ce"]["output_layer"] == H * V + V  # the softmax layer
    assert counts["nllvmf tied"]["output_layer"] == H * M + M  # d_model -> m
    assert counts["nllvmf tied"]["input_layer"] == M * H + H  # the frozen table's projection


def test_correction_and_trained_table_rows_are_counted():
    """The rows of the recommended configuration: -sampling_correction's expected counts have no
    meta kernel (a stand-in of their shape), and a trained table adds its gradient's product to
    the frozen table's count: 2·m per negative candidate of every target token (the gold rows'
    gradient is elementwise, which the counter does not count)."""
    batch = benchlib.synthetic_batch(B, V, V, "cpu", src_len=S)
    both = ["-loss", "nllvmf_nce", "-tie_emb", "-sampling_correction", "-word_bias", "-negatives", "inbatch,random"]
    frozen = flops.step_flops(tiny_options(*both), V, V, batch, True)["total"]
    trained = flops.step_flops(tiny_options(*both, "-train_table"), V, V, batch, True)["total"]
    n = int((batch["tgt"][:, 1:] != PAD_ID).sum())
    candidates = n + 64  # in-batch: the batch's n targets; random: -num_sampled 64
    assert trained - frozen == 2 * M * n * candidates


@pytest.mark.slow
def test_amp_shapes_times_new_and_seen_shapes(tmp_path, capsys):
    """lab/bench/amp_shapes.py on CPU: one row, fp32, two updates per phase in a fresh worker process; the
    JSON holds both phases' times; a GPU-only mode without -gpu and an unknown row are refused."""
    import json

    from lab.bench import amp_shapes

    out = tmp_path / "r.json"
    amp_shapes.main(
        [
            "-rows",
            "ce",
            "-modes",
            "fp32",
            "-steps",
            "2",
            "-batch_size",
            "4",
            "-vocab",
            "50",
            "-threads",
            "1",
            "-json",
            str(out),
        ]
    )
    (result,) = json.loads(out.read_text())
    assert result["row"] == "ce" and result["mode"] == "fp32" and "error" not in result
    assert result["new"] > 0 and result["seen"] > 0 and result["kernels"] == {}
    assert "new/seen" in capsys.readouterr().out
    for bad, needle in ((["-modes", "bf16_no_cudnn_sdpa"], "needs -gpu"), (["-rows", "softmax"], "unknown")):
        with pytest.raises(SystemExit, match=needle):
            amp_shapes.main(bad + ["-steps", "1"])


def test_benchmarks_of_the_candidate_terms_compare_like_with_like(capsys):
    """lab/bench/expected_counts.py's former implementation gives the current one's bits (the claim it
    prints), and lab/bench/candidate_dots.py's three contenders run on a small batch."""
    from lab.bench import candidate_dots, expected_counts

    expected_counts.main(["-tokens", "60", "-vocab", "300", "-num_sampled", "9", "-ann_candidates", "5", "-reps", "4"])
    assert "the same bits: True" in capsys.readouterr().out
    candidate_dots.main(["-tokens", "30", "-candidates", "5", "-vocab", "200", "-dim", "16", "-reps", "3"])
    assert "/ former" in capsys.readouterr().out


def test_dropout_benchmark_runs(capsys):
    """lab/bench/dropout_mask.py times both dropouts on every shape and prints their drop rates."""
    from lab.bench import dropout_mask

    dropout_mask.main(["-batch", "2", "-reps", "4", "-p", "0.5"])
    out = capsys.readouterr().out
    assert out.count("ratio") == 3 and "drop rate: F.dropout" in out


def test_label_smoothing_bench_runs(capsys):
    """lab/bench/label_smoothing.py times both losses for every smoothing it is given."""
    from lab.bench import label_smoothing

    label_smoothing.main(["-tokens", "5", "-vocab", "11", "-reps", "4", "-smoothing", "0.1", "0"])
    out = capsys.readouterr().out
    assert out.count("ratio") == 2 and "label_smoothing 0.0:" in out
    label_smoothing.main(["-tokens", "5", "8", "-vocab", "11", "13", "-reps", "4", "-smoothing", "0.1"])
    out = capsys.readouterr().out
    assert out.count("ratio") == 4 and "[8, 13] logits" in out and "[5, 11] logits" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_label_smoothing_bench_refuses_gpu_without_cuda(capsys):
    from lab.bench import label_smoothing

    with pytest.raises(SystemExit) as err:
        label_smoothing.main(["-gpu", "0"])
    assert err.value.code == 2 and "sees no CUDA device" in capsys.readouterr().err


def test_profile_train_ranks_operators(tmp_path, capsys):
    """lab/bench/profile_train.py runs train.py under the profiler and lists its operators; without '--' it
    says what it needs."""
    from lab.bench import profile_train
    from tests.helpers import argv, memorisation_data

    data = memorisation_data(tmp_path, 8)
    profile_train.main(["-top", "5", "--", *argv(data, tmp_path, train_steps=2, log_file=str(tmp_path / "t.log"))])
    out = capsys.readouterr().out
    assert "profiled:" in out and "Self CPU" in out and "aten::" in out
    with pytest.raises(SystemExit, match="after '--'"):
        profile_train.main(["-top", "5"])


def test_logits_product_bench_checks_and_times_every_variant(capsys):
    """lab/bench/logits_product.py checks that its variants agree with F.linear, then times each."""
    from lab.bench import logits_product

    logits_product.main(["-tokens", "7", "-vocab", "13", "-dim", "4", "-reps", "4"])
    out = capsys.readouterr().out
    assert all(f"{name} " in out for name in logits_product.VARIANTS) and "[7, 4] x [4, 13]" in out


def test_peer_early_steps_counts_loops_and_writes_the_variant_into_the_peer_config():
    import types

    from lab.bench import peer_early_steps

    assert peer_early_steps.loops(["a man in a man in a", "a man in a red shirt .", "two dogs"]) == 1 / 3
    args = types.SimpleNamespace(data="d", src="fr", tgt="en", out="o", steps=300, learning_rate=2.0, warmup_steps=100)
    config = peer_early_steps.peer_config(args, 7, "normalization: tokens; max_grad_norm: 0", "o/p")
    lines = config.splitlines()
    assert "seed: 7" in lines and "normalization: tokens" in lines and "max_grad_norm: 0" in lines
    assert "learning_rate: 2.0" in lines and "valid_steps: 300" in lines
    cmd = peer_early_steps.ours_command(args, 7, "-max_grad_norm 0", "o/x")
    assert cmd[-2:] == ["-max_grad_norm", "0"] and cmd[cmd.index("-seed") + 1] == "7"


@pytest.mark.slow
def test_tiny_step_times_both_paths_on_real_batches(tmp_path, capsys):
    """lab/bench/tiny_step.py on the shipped sample, preprocessed with one vocabulary: its two softmax rows (fp32 and
    -amp auto) build train.py's Run in workers, take real batches and print the table and the profile."""
    import os

    from lab.bench import tiny_step
    from onmt_cont.bin import preprocess

    root = ROOT
    data = os.path.join(root, "data")
    preprocess.main(
        [
            "-train_src",
            f"{data}/train.fr",
            "-train_tgt",
            f"{data}/train.en",
            "-valid_src",
            f"{data}/valid.fr",
            "-valid_tgt",
            f"{data}/valid.en",
            "-save_data",
            str(tmp_path / "d"),
            "-share_vocab",
        ]
    )
    tiny_step.main(["-data", str(tmp_path / "d"), "-batches", "3", "-warmup", "1", "-profile", "-profile_steps", "1"])
    out = capsys.readouterr().out
    assert "| softmax fp32 | " in out and "| softmax -amp auto | " in out
    assert "softmax fp32: autocast None" in out and "operators' self time per update" in out
    # -fp32_only (a CPU without bfloat16 dot products): the float32 row alone
    tiny_step.main(["-data", str(tmp_path / "d"), "-batches", "2", "-warmup", "1", "-fp32_only"])
    out = capsys.readouterr().out
    assert "| softmax fp32 | " in out and "-amp" not in out


def test_valid_curves_compares_groups_against_their_seeds(tmp_path, capsys):
    from lab.tools import valid_curves

    logs = {}
    for name, losses in {"a1": [5.0, 4.0], "a2": [5.1, 4.1], "b1": [5.05, 3.5], "b2": [5.06, 3.6]}.items():
        logs[name] = tmp_path / f"{name}.log"
        logs[name].write_text(
            "".join(f"[00:00:00] validation at step {10 * (i + 1)}: loss {x}; ppl 1\n" for i, x in enumerate(losses)),
            encoding="utf-8",
        )
    valid_curves.main(
        ["-group", "a", str(logs["a1"]), str(logs["a2"]), "-group", "b", str(logs["b1"]), str(logs["b2"])]
    )
    out = capsys.readouterr().out
    assert "| 10 | 5.0000 | 5.1000 | 5.0500 | 5.0600 |" in out
    assert out.strip().endswith("the means differ by more than the seeds' spread at 1 of them")


def test_screen_table_sets_runs_best_and_shared_validations_side_by_side(tmp_path, capsys):
    from lab.tools import screen_table

    def log(name, rows, nn=True):
        path = tmp_path / f"{name}.log"
        path.write_text(
            "".join(
                f"[00:00:00] validation at step {s}: loss {loss}; cosine 0.8; "
                + (f"nn accuracy {40 + bleu}%; " if nn else "ppl 7.4; accuracy 40.00%; ")
                + f"greedy BLEU {bleu} (<unk> 0.0%)\n"
                for s, loss, bleu in rows
            ),
            encoding="utf-8",
        )
        return str(path)

    a = log("a", [(512, -1.0, 10.0), (1024, -2.0, 20.0), (1536, -1.5, 25.0)])
    # a softmax run (no nn accuracy); a resumed run's later line wins
    b = log("b", [(512, -0.5, 5.0), (1024, -1.0, 12.0), (1024, -1.1, 13.0)], nn=False)
    screen_table.main(["-run", "A", a, "-run", "B", b])
    out = capsys.readouterr().out
    assert "| A | 3 | 1536 | -2.0000 (1024) | 65.00 (1536) | 25.00 (1536) |" in out
    assert "| B | 2 | 1024 | -1.1000 (1024) | – | 13.00 (1024) |" in out
    assert "| 1024 | -2.0000 / 60.00 / 20.00 | -1.1000 / – / 13.00 |" in out
    assert "| 1536 |" not in out.split("\n| update |")[1]
    with pytest.raises(SystemExit, match="no validation with greedy BLEU"):
        screen_table.main(["-run", "C", log("c", []), "-run", "A", a])


def test_short_softmax_bench_times_both_sides_of_the_crossover(capsys):
    from lab.bench import short_softmax

    short_softmax.main(["-lengths", "5,16", "-tokens", "200", "-reps", "3"])
    out = capsys.readouterr().out
    assert "| 5 | [40, 4, 5, 5] |" in out and "| 16 | [12, 4, 16, 16] |" in out


def test_shared_block_bf16_bench_times_and_checks_every_variant(capsys):
    from lab.bench import shared_block_bf16

    shared_block_bf16.main(["-rows", "8", "-candidates", "50", "-reps", "3"])
    out = capsys.readouterr().out
    for name in ("float32 (now)", "bfloat16", "bfloat16 shifted by the gold logit", "bfloat16 shifted by ‖ê‖"):
        assert f"| {name} |" in out
    errors = [float(line.split("|")[4]) for line in out.splitlines() if line.startswith("| float32 (now)")]
    assert errors and errors[0] < 1e-4  # float32 against float64
