"""Nearest-neighbour scores of the continuous generator, greedy and beam search against stub
models whose next-word scores are a hand-written function of the prefix."""

import pytest
import torch

from onmt_cont.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from onmt_cont.models.generators import ContinuousGenerator
from onmt_cont.translate.search import blocked_words, length_penalty
from onmt_cont.vmf import log_cmk
from tests.helpers import NEG, A, B, C, D, V, W, X, Z, row, run_beam, run_greedy

# -- nearest-neighbour decoding ------------------------------------------------------------------

# Row 0 is the zero padding row (as normalize_table leaves it), the others unit-length words.
TABLE = torch.tensor(
    [
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [0.6, 0.8, 0.0],
        [0.0, -0.6, 0.8],
        [-1.0, 0.0, 0.0],
    ]
)


def generator(criterion):
    return ContinuousGenerator(hidden_size=4, table=TABLE.clone(), criterion=criterion)


# (prediction ê, index of its nearest neighbour; hand-computed dots with rows 1..6 in the comment)
CASES = [
    ([2.0, 0.5, 0.0], 1),  # dots 2, .5, 0, 1.6, -.3, -2
    ([0.5, 0.7, 0.0], 4),  # dots .5, .7, 0, .86, -.42, -.5
    ([0.0, -0.3, 0.5], 5),  # dots 0, -.3, .5, -.24, .58, 0
    ([-0.1, 0.0, 0.0], 6),  # a short vector: its direction still decides (l2: .81 vs 1.01 ...)
    ([0.0, 30.0, 1.0], 2),  # a long one (kappa 30)
    ([0.1, 0.1, 0.1], 4),  # every dot < 1/2: the zero padding row is nearer in l2, yet no word
    ([-0.2, -0.2, -0.2], 6),  # every dot <= .2 and some < 0
]


@pytest.mark.parametrize("criterion", ContinuousGenerator.CRITERIA)
@pytest.mark.parametrize("pred, nearest", CASES)
def test_nearest_neighbour_each_criterion(criterion, pred, nearest):
    scores = generator(criterion).scores(torch.tensor([pred]))
    assert scores.shape == (1, len(TABLE))
    assert scores.argmax(-1).item() == nearest


def test_scores_match_their_formulas():
    pred = torch.tensor([[0.5, 0.7, 0.0], [0.0, -3.0, 5.0]])
    dots = pred @ TABLE.t()
    norm = pred.norm(dim=-1, keepdim=True)
    vmf = generator("vmf").scores(pred)
    # log C_m(‖ê‖) is the same for every word: the scores differ from êᵀe(w) by one constant per row
    offset = (vmf - dots)[:, 1:]
    torch.testing.assert_close(offset, offset[:, :1].expand_as(offset))
    torch.testing.assert_close(offset[:, :1], log_cmk(norm, 3).float())
    torch.testing.assert_close(generator("cosine").scores(pred)[:, 1:], (dots / norm)[:, 1:])
    l2 = -((pred[:, None, :] - TABLE[None]) ** 2).sum(-1)
    torch.testing.assert_close(generator("l2").scores(pred)[:, 1:], l2[:, 1:])
    for criterion in ContinuousGenerator.CRITERIA:  # the padding row is no word
        assert (generator(criterion).scores(pred)[:, PAD_ID] == float("-inf")).all()


def test_criteria_rank_neighbours_alike_but_score_differently():
    pred = torch.tensor([[0.0, -3.0, 5.0]])
    ranks = {c: generator(c).scores(pred)[:, 1:].argsort(-1, descending=True) for c in ContinuousGenerator.CRITERIA}
    assert torch.equal(ranks["vmf"], ranks["cosine"]) and torch.equal(ranks["l2"], ranks["cosine"])
    assert not torch.allclose(generator("cosine").scores(pred)[:, 1:], generator("l2").scores(pred)[:, 1:])


def test_unknown_criterion_is_refused():
    with pytest.raises(ValueError, match="criterion"):
        ContinuousGenerator(4, TABLE, criterion="dot")


# -- greedy ---------------------------------------------------------------------------------------

CHAIN = {(): A, (A,): B, (A, B): C, (A, B, C): EOS_ID}


def chain_table(sid, prefix):
    """A B C </s>, with <blank> and <s> scored highest of all (they must never come out)."""
    r = row({CHAIN.get(prefix, EOS_ID): 0.9, W: 0.1})
    r[PAD_ID] = r[BOS_ID] = 10.0
    return r


def test_greedy_expected_sequence_stops_at_eos_and_feeds_words_back():
    model, ids, attn = run_greedy(chain_table, [[4, 5, 6]], [10])
    assert ids == [[A, B, C]]
    # the first input is <s>, then each chosen word; nothing after </s>
    assert model.decoder.calls == [[BOS_ID], [A], [B], [C]]
    assert attn[0].shape == (3, 3)


def test_greedy_never_emits_padding_or_bos_but_may_emit_unk():
    def table(sid, prefix):
        r = row({UNK_ID: 0.6, EOS_ID: 0.4} if not prefix else {EOS_ID: 1.0})
        r[PAD_ID] = r[BOS_ID] = 100.0
        return r

    _, ids, _ = run_greedy(table, [[4]], [5])
    assert ids == [[UNK_ID]]


def test_greedy_respects_max_lengths_per_sentence():
    never_ends = lambda sid, prefix: row({W: 0.9, EOS_ID: 0.1})  # noqa: E731
    model, ids, attn = run_greedy(never_ends, [[4, 5], [6], [7, 8, 9]], [3, 1, 0])
    assert ids == [[W] * 3, [W], []]
    assert [a.shape[0] for a in attn] == [3, 1, 0]
    # no step beyond the longest limit, and a sentence that ended leaves the batch: the third
    # (limit 0) after the first step, the second (limit 1) after the second
    assert model.decoder.calls == [[BOS_ID] * 3, [W, W], [W]]


def test_greedy_batch_sentences_end_independently():
    def table(sid, prefix):
        target = {4: [A, B], 5: [C], 6: [D, D, D]}[sid]
        return row({(target + [EOS_ID])[len(prefix)]: 1.0} if len(prefix) <= len(target) else {EOS_ID: 1.0})

    model, ids, attn = run_greedy(table, [[4, 9], [5], [6, 9, 9]], [10, 10, 10])
    assert ids == [[A, B], [C], [D, D, D]]
    assert len(model.decoder.calls) == 4  # stops once every sentence has ended
    # the attention fixture: step t attends position t mod source length (before padding)
    assert attn[1].shape == (1, 3)
    assert attn[0].argmax(-1).tolist() == [0, 1]


def test_greedy_first_step_never_ends_a_nonempty_source():
    eos_first = lambda sid, prefix: row({EOS_ID: 0.9, W: 0.1})  # noqa: E731
    _, ids, _ = run_greedy(eos_first, [[4]], [5])
    assert ids == [[W]]


# -- beam search ----------------------------------------------------------------------------------


def trap_table(sid, prefix):
    """Greedy takes A (0.5 > 0.4) and ends with A X (0.5 · 0.4 = 0.2); beam finds B Z (0.4 · 0.9 = 0.36)."""
    return row(
        {
            (): {A: 0.5, B: 0.4, EOS_ID: 0.1},
            (A,): {X: 0.4, W: 0.3, EOS_ID: 0.3},
            (B,): {Z: 0.9, EOS_ID: 0.1},
        }.get(prefix, {EOS_ID: 1.0})
    )


def test_beam_beats_greedy_when_the_first_best_word_leads_nowhere():
    _, greedy_ids, _ = run_greedy(trap_table, [[4]], [10])
    assert greedy_ids == [[A, X]]
    _, beam_ids, _ = run_beam(trap_table, [[4]], [10], k=2)
    assert beam_ids == [[B, Z]]


def random_table(sid, prefix, vocab=V):
    """Deterministic pseudo-random log-probabilities of (sentence, prefix)."""
    g = torch.Generator().manual_seed(hash((sid, prefix)) % (2**31))
    logits = torch.randn(vocab, generator=g) * 2
    logits[EOS_ID] += 0.5 * len(prefix) - 2  # longer prefixes end more often
    return torch.log_softmax(logits, 0).tolist()


@pytest.mark.parametrize("penalty", ["none", "avg", "wu"])
def test_beam_size_one_equals_greedy(penalty):
    srcs = [[4, 5, 6], [7], [8, 9, 4, 5], [6, 6]]
    max_lengths = [12, 3, 8, 0]
    _, g_ids, g_attn = run_greedy(random_table, srcs, max_lengths)
    _, b_ids, b_attn = run_beam(random_table, srcs, max_lengths, k=1, penalty=penalty, alpha=0.7)
    assert b_ids == g_ids
    for g, b in zip(g_attn, b_attn, strict=True):
        torch.testing.assert_close(b, g)


def short_or_long(sid, prefix):
    """'A' scores 0.7 · 0.6 = 0.42 over 1 word; 'B C D' 0.3 over 3 words (A W: 0.28 over 2)."""
    return row(
        {
            (): {A: 0.7, B: 0.3},
            (A,): {EOS_ID: 0.6, W: 0.4},
            (A, W): {EOS_ID: 1.0},
            (B,): {C: 1.0},
            (B, C): {D: 1.0},
        }.get(prefix, {EOS_ID: 1.0})
    )


@pytest.mark.parametrize(
    "penalty, alpha, winner",
    [
        ("none", 0.0, [A]),  # log .42 = -0.87 beats log .3 = -1.20
        ("avg", 0.0, [B, C, D]),  # -1.20 / 3 = -0.40 beats -0.87 / 1
        ("wu", 0.0, [A]),  # alpha 0: no penalty
        ("wu", 1.0, [A]),  # -1.20 / (8/6) = -0.90 < -0.87
        ("wu", 3.0, [B, C, D]),  # -1.20 / (8/6)^3 = -0.51 > -0.87 / 1
    ],
)
def test_length_normalisation_changes_the_winner(penalty, alpha, winner):
    _, ids, _ = run_beam(short_or_long, [[4]], [10], k=2, penalty=penalty, alpha=alpha)
    assert ids == [winner]


def test_length_penalty_values():
    assert length_penalty(4, "none", 0.5) == 1.0
    assert length_penalty(4, "avg", 0.5) == 4.0
    assert length_penalty(7, "wu", 1.0) == pytest.approx(2.0)
    assert length_penalty(1, "wu", 3.0) == pytest.approx(1.0)


def test_beam_never_counts_a_banned_end_as_finished():
    """A vocabulary of 5 and a beam of 5: the top-k then holds every word of the one live
    hypothesis, </s> included even while it scores -inf. Such an entry must neither end a
    hypothesis nor, by filling the k finished slots, stop the search before the real end."""

    def table(sid, prefix):  # <blank> <unk> <s> </s> A: A A A A A A </s>
        r = [NEG] * 5
        r[A if len(prefix) < 6 else EOS_ID] = 0.0
        return r

    _, ids, _ = run_beam(table, [[4]], [10], k=5, penalty="avg")
    assert ids == [[A] * 6]


def test_beam_respects_max_length_and_bans_pad_bos():
    def table(sid, prefix):
        r = row({W: 0.8, EOS_ID: 0.1, X: 0.1})
        r[PAD_ID] = r[BOS_ID] = 50.0
        return r

    model, ids, attn = run_beam(table, [[4, 5], [6]], [3, 0], k=3, penalty="avg")
    assert len(ids[0]) <= 3 and ids[1] == []
    assert all(w in (W, X, UNK_ID) for w in ids[0])
    assert attn[0].shape == (len(ids[0]), 2) and attn[1].shape == (0, 2)


def test_beam_first_step_never_ends_a_nonempty_source():
    eos_first = lambda sid, prefix: row({EOS_ID: 0.9, W: 0.1} if not prefix else {EOS_ID: 1.0})  # noqa: E731
    _, ids, _ = run_beam(eos_first, [[4]], [5], k=3, penalty="none")
    assert ids == [[W]]


def test_beam_attention_is_padded_to_the_batch_source_length():
    _, ids, attn = run_beam(trap_table, [[4], [4, 9, 9, 9]], [10, 10], k=2)
    assert ids == [[B, Z], [B, Z]]
    assert attn[0].shape == (2, 4) and attn[0][:, 1:].abs().sum() == 0
    assert attn[1].argmax(-1).tolist() == [0, 1]


def test_beam_feeds_chosen_words_back():
    model, ids, _ = run_beam(trap_table, [[4]], [10], k=2)
    calls = model.decoder.calls
    assert calls[0] == [BOS_ID]
    assert sorted(calls[1]) == sorted([A, B])  # both first words continue
    assert sorted(calls[2]) == sorted([X, Z])  # the two best second words


# -- -block_ngram_repeat --------------------------------------------------------------------------


def brute_blocked(seq, n, vocab):
    """The words w for which seq + [w] holds some n-gram twice, by counting every n-gram."""
    out = set()
    for w in vocab:
        s = list(seq) + [w]
        grams = [tuple(s[i : i + n]) for i in range(len(s) - n + 1)]
        if len(grams) != len(set(grams)):
            out.add(w)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_blocked_words_against_counting_every_ngram(n):
    g = torch.Generator().manual_seed(n)
    for _ in range(200):
        length = int(torch.randint(0, 9, (1,), generator=g))
        seq = torch.randint(4, 8, (length,), generator=g).tolist()  # few words: many repeats
        # a prefix that already holds a repeat (impossible under blocking) is left out
        grams = [tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)]
        if len(grams) != len(set(grams)):
            continue
        assert blocked_words(seq, n) == brute_blocked(seq, n, range(4, 8)), (seq, n)
    assert blocked_words([A, B, A], 0) == set()


def stutter_table(sid, prefix):
    """Prefers to repeat its last word (A A A ...); otherwise A, B, C, D in that order; ends after 6 words."""
    if len(prefix) >= 6:
        return row({EOS_ID: 1.0})
    probs = {A: 0.2, B: 0.15, C: 0.1, D: 0.08, EOS_ID: 0.05}
    probs[prefix[-1] if prefix else A] = 0.45
    return row(probs)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_block_ngram_repeat_changes_the_output_and_leaves_no_repeated_ngram(search):
    run = (
        (lambda block: run_greedy(stutter_table, [[4]], [10], block)[1][0])
        if search == "greedy"
        else (lambda block: run_beam(stutter_table, [[4]], [10], 2, block=block)[1][0])
    )
    assert run(0) == [A] * 6  # without it, the stutter
    for n in (1, 2, 3):
        ids = run(n)
        grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
        assert len(grams) == len(set(grams)), (n, ids)
        assert ids != [A] * 6
    if search == "greedy":
        assert run(1) == [A, B, C, D]  # no word twice: the next best each time, then </s>


def test_greedy_block_ends_a_sentence_whose_every_word_is_blocked():
    """Only A and </s> are scored; </s> is banned at the first step. With n = 1, A may come once,
    then every word but </s> is -inf, and </s> wins; were it blocked too, the sentence would end."""
    only_a = lambda sid, prefix: row({A: 0.9, EOS_ID: 0.1} if prefix else {A: 1.0})  # noqa: E731
    _, ids, _ = run_greedy(only_a, [[4], [5]], [10, 10], block=1)
    assert ids == [[A], [A]]
    no_end = lambda sid, prefix: row({A: 1.0})  # noqa: E731
    _, ids, attn = run_greedy(no_end, [[4]], [10], block=1)
    assert ids == [[A]] and attn[0].shape[0] == 1


def test_block_ngram_repeat_keeps_each_sentence_of_a_batch_to_its_own_words():
    """Sentences that end at different steps leave the batch; each keeps its own prefix."""

    def table(sid, prefix):
        if len(prefix) >= {4: 2, 5: 5}[sid]:
            return row({EOS_ID: 1.0})
        return row({A: 0.5, B: 0.3, C: 0.2})

    _, ids, _ = run_greedy(table, [[4], [5]], [10, 10], block=1)
    assert ids == [[A, B], [A, B, C]]  # the second ends when every word is blocked
