"""Issue 21's word-choice options, by hand and end to end: the training unigram prior, the
sampling-bias correction of the contrastive losses (-sampling_correction), the learned per-word
bias (-word_bias), and the decoding-time re-scorings (translate.py -decode_prior, -csls)."""

import math
from argparse import Namespace

import pytest
import torch
import torch.nn.functional as F

from onmt_cont.bin import translate
from onmt_cont.constants import EOS_ID, UNK_ID
from onmt_cont.inputters.vocab import Vocab, capped_log_prior, load_vocabs, unigram_log_prior, word_log_frequency
from onmt_cont.losses import build_loss
from onmt_cont.losses.contrastive import _corrected_cross_entropy, unique_shared
from onmt_cont.losses.expected_counts import own_sentence_words
from onmt_cont.losses.negatives import Negatives, candidate_ids, invalid
from onmt_cont.losses.token_dots import candidate_dots
from onmt_cont.models.checkpoint import load_checkpoint, model_from_checkpoint
from onmt_cont.models.generators import ContinuousGenerator, table_hubness
from onmt_cont.outputs import BiasedVector
from tests.helpers import WC, memorisation_data, reported_losses, run_train, translate_args
from tests.helpers import train_fails as fails

# --- the prior ------------------------------------------------------------------------------------


def test_unigram_log_prior_by_hand():
    """words: their counts; <unk>: the tokens no word covers (10 - 7 = 3); </s>: one per sentence
    (4); padding and <s>: 0; all add-one smoothed over T + S + V = 10 + 4 + 6."""
    vocab = Vocab(["<blank>", "<unk>", "<s>", "</s>", "a", "b"], [0, 0, 0, 0, 5, 2], total_tokens=10, sentences=4)
    got = unigram_log_prior(vocab).exp()
    want = torch.tensor([1, 4, 1, 5, 6, 3], dtype=torch.float32) / 20
    torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="rerun preprocess.py"):
        unigram_log_prior(Vocab(vocab.itos, vocab.counts, total_tokens=10))  # an old file: no sentence count


def test_word_log_frequency_by_hand():
    """-expected_counts sentence's q: each word's share of the 10 training words (</s> not counted;
    <unk>: the 3 no word covers); padding, <s> and </s>: 0."""
    vocab = Vocab(["<blank>", "<unk>", "<s>", "</s>", "a", "b"], [0, 0, 0, 0, 5, 2], total_tokens=10, sentences=4)
    torch.testing.assert_close(word_log_frequency(vocab).exp(), torch.tensor([0, 0.3, 0, 0, 0.5, 0.2]))


def test_capped_log_prior_by_hand():
    """-decode_prior_cap 3: flat (0) for words seen 3 times or more; log((c + 1) / 4) below."""
    vocab = Vocab(
        ["<blank>", "<unk>", "<s>", "</s>", "a", "b", "c", "d"], [0, 0, 0, 0, 5, 3, 2, 1], total_tokens=12, sentences=4
    )  # <unk>: 12 - 11 = 1 token
    got = capped_log_prior(vocab, 3)
    want = torch.log(torch.tensor([1, 2, 1, 5, 6, 4, 3, 2], dtype=torch.float32) / 4).clamp_max(0)
    torch.testing.assert_close(got, want)
    assert got[4] == got[5] == 0 and got[7] < got[6] < 0
    # with no cap reached it is the plain prior up to a constant: the same argmax under any beta
    far = capped_log_prior(vocab, 10_000)
    torch.testing.assert_close(far - far[4], unigram_log_prior(vocab) - unigram_log_prior(vocab)[4])
    with pytest.raises(ValueError, match="at least 2"):
        capped_log_prior(vocab, 1)


def test_preprocess_records_sentences(tmp_path):
    ds = memorisation_data(tmp_path, 8)
    _, tgt, data = load_vocabs(ds["prefix"] + ".vocab.pt")
    assert tgt.sentences == 20 == data["tgt"]["sentences"]
    assert tgt.total_tokens == sum(len(line.split()) for line in ds["tgt"])


# --- expected counts and the corrected losses -----------------------------------------------------

TABLE = F.normalize(torch.tensor([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0.6, 0.8, 0], [0, 0.6, 0.8]]), dim=-1)
TABLE[0] = 0
PRIOR = torch.log(torch.tensor([1e-9, 0.1, 1e-9, 0.2, 0.3, 0.4]))  # p_train (padding and <s> ~ 0)


def test_log_expected_counts_by_hand():
    """Two tokens with targets 4 and 5; shared candidates: in-batch [4, 5] and 'random' (2 draws
    over V-1 = 5 words, 0.4 each); per token: the gold word's 2 nearest rows (gold_nn, itself first)."""
    neg = Negatives(
        ("inbatch", "random", "gold_nn"), TABLE, num_sampled=2, ann_candidates=1, log_prior=PRIOR, counts="unigram"
    )
    target = torch.tensor([4, 5])
    shared, per_token = neg(None, target)
    assert shared[:2].tolist() == [4, 5] and shared.numel() == 4
    got = neg.log_expected_counts(target, shared, per_token).exp()
    p = PRIOR.double().exp()
    for i in range(2):
        for c, j in enumerate(shared.tolist() + per_token[i].tolist()):
            own = per_token[i].tolist().count(j)  # j is in token i's own neighbour list
            want = 2 * p[j] + 0.4 + own
            assert got[i, c].item() == pytest.approx(want.item(), rel=1e-6), (i, c, j)


@pytest.mark.parametrize("counts", ["batch", "unigram"])
@pytest.mark.parametrize(
    "sources",
    [("inbatch", "random", "gold_nn"), ("inbatch", "gold_nn", "ann"), ("random", "ann"), ("inbatch", "random")],
)
def test_log_expected_counts_brute_force(sources, counts):
    """Against comparing every candidate with every per-token list entry, on a batch whose targets
    repeat (in-batch duplicates) and with two per-token sources (a word in both lists counts 2)."""
    table, prior = F.normalize(torch.randn(50, 6, generator=torch.Generator().manual_seed(2)), dim=-1), None
    table[0] = 0
    prior = torch.log_softmax(torch.randn(50, generator=torch.Generator().manual_seed(3)), 0)
    neg = Negatives(sources, table, num_sampled=7, ann_candidates=5, log_prior=prior, counts=counts)
    target = torch.tensor([3, 3, 3, 9, 17, 9, 44, 3])
    torch.manual_seed(0)
    shared, per_token = neg(F.normalize(torch.randn(8, 6), dim=-1), target)
    got = neg.log_expected_counts(target, shared, per_token)
    base = torch.zeros(50, dtype=torch.float64)
    if "inbatch" in sources:  # batch: each word's count in the batch; unigram: 8 tokens x p_train
        base += torch.bincount(target, minlength=50).double() if counts == "batch" else 8 * prior.double().exp()
    base[1:] += 7 / 49 if "random" in sources else 0
    parts = []
    if shared is not None:
        cross = (shared.view(1, -1, 1) == per_token.unsqueeze(1)).sum(-1) if per_token is not None else 0
        parts.append(base[shared].unsqueeze(0).expand(8, -1) + cross)
    if per_token is not None:
        parts.append(base[per_token.clamp_min(0)] + (per_token.unsqueeze(2) == per_token.unsqueeze(1)).sum(-1))
    want = torch.log(torch.cat(parts, 1)).float()
    valid = [torch.ones(8, shared.numel(), dtype=torch.bool)] if shared is not None else []
    valid = torch.cat(valid + ([per_token > 0] if per_token is not None else []), 1)
    torch.testing.assert_close(got[valid], want[valid])
    if "gold_nn" in sources and "ann" in sources:
        assert (got[:, shared.numel() :] > torch.log(base[per_token.clamp_min(0)] + 1.5).float()).any()


def test_own_sentence_words_by_hand():
    """Each token's own sentence, −1 at its own position and past the end; a last sentence without </s>
    is one too."""
    e = EOS_ID
    own, length, ends = own_sentence_words(torch.tensor([5, 6, e, 7, e, 8]))
    assert own.tolist() == [[-1, 6, e], [5, -1, e], [5, 6, -1], [-1, e, -1], [7, -1, -1], [-1, -1, -1]]
    assert length.tolist() == [3, 3, 3, 2, 2, 1] and ends.tolist() == [1, 1, 1, 1, 1, 0]


@pytest.mark.parametrize("sources", [("inbatch", "random", "gold_nn"), ("inbatch", "gold_nn", "prefix"), ("inbatch",)])
def test_sentence_counts_brute_force(sources):
    """counts="sentence", entry by entry: K_i q(j) + (</s>: the other sentences' B - 1) + j's count in
    token i's own sentence outside position i + the random term + j's count in i's own lists."""
    vocab, e = 30, EOS_ID
    table = F.normalize(torch.randn(vocab, 6, generator=torch.Generator().manual_seed(2)), dim=-1)
    table[0] = 0
    q = torch.softmax(torch.randn(vocab, generator=torch.Generator().manual_seed(3)).double(), 0)
    q[:4] = 0
    q /= q.sum()
    neg = Negatives(sources, table, num_sampled=5, ann_candidates=4, log_prior=q.log().float(), counts="sentence")
    target = torch.tensor([9, 9, 4, e, 9, 12, e, 12, 20, 21, 9, e])
    torch.manual_seed(0)
    shared, per_token = neg(None, target)
    got = neg.log_expected_counts(target, shared, per_token).exp().double()
    sentences = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11]]
    for i in range(target.numel()):
        own = next(s for s in sentences if i in s)
        own_words = [target[k].item() for k in own if k != i]
        others = [target[k].item() for s in sentences if s is not own for k in s]
        k_words = sum(w != e for w in others)
        lists = per_token[i].tolist() if per_token is not None else []
        for c, j in enumerate((shared.tolist() if shared is not None else []) + lists):
            if j <= 0:
                continue
            want = k_words * q[j].item() + (len(sentences) - 1 if j == e else 0) + own_words.count(j)
            want += 5 / (vocab - 1) if "random" in sources else 0
            want += lists.count(j)
            assert got[i, c].item() == pytest.approx(want, rel=1e-5), (i, c, j)


def test_sentence_counts_unbiased_over_batches():
    """counts="sentence"'s claim: token i's sentence plus B - 1 sentences drawn from the corpus, the
    mean over batches and draws of exp(gold) + Σ exp(logit_j - log E_i(j)) is the full normaliser.
    The batch rule is unbiased too (given any batch); the unigram rule is not (own sentence)."""
    vocab, gen = 20, torch.Generator().manual_seed(7)
    words = torch.arange(4, vocab)
    p_word = 1.0 / torch.arange(1, words.numel() + 1, dtype=torch.float64)
    p_word /= p_word.sum()
    q = torch.zeros(vocab, dtype=torch.float64)
    q[4:] = p_word
    table = F.normalize(torch.randn(vocab, 8, generator=gen), dim=-1)
    table[0] = 0
    own = torch.tensor([19, 19, 4, 17, EOS_ID])  # a sentence of rare words, one repeated
    pred = 2.0 * torch.randn(own.numel(), 8, generator=gen)
    full = (pred @ table[1:].t()).exp().sum(1).double()
    prior = {
        "sentence": q.clamp_min(1e-30).log().float(),
        "batch": None,
        "unigram": (q * 0.8 + 0.2 * (torch.arange(vocab) == EOS_ID)).clamp_min(1e-30).log().float(),
    }
    ratios = {}
    for counts in ("sentence", "batch", "unigram"):
        neg = Negatives(
            ("inbatch", "random", "gold_nn"),
            table,
            num_sampled=3,
            ann_candidates=2,
            log_prior=prior[counts],
            counts=counts,
        )
        torch.manual_seed(1)
        draws, total = 3000, torch.zeros(own.numel(), dtype=torch.float64)
        for _ in range(draws):
            others = [
                torch.cat([words[torch.multinomial(p_word, int(n), replacement=True)], torch.tensor([EOS_ID])])
                for n in torch.randint(1, 6, (3,))
            ]
            target = torch.cat([own] + others)
            vec = torch.cat([pred, torch.zeros(target.numel() - own.numel(), 8)])
            shared, per_token = neg(None, target)
            shared, repeats = unique_shared(shared, per_token.size(1))
            dots = candidate_dots(vec, table, shared, per_token) - neg.log_expected_counts(target, shared, per_token)
            dots = (dots + repeats).masked_fill(invalid(target, shared, per_token), float("-inf"))[: own.numel()]
            gold = (pred * table[own]).sum(1)
            total += (gold.exp() + dots.exp().sum(1)).double()
        ratios[counts] = total / draws / full
    assert (ratios["sentence"] - 1).abs().max() < 0.05, ratios
    assert (ratios["batch"] - 1).abs().max() < 0.05, ratios
    assert (ratios["unigram"] - 1).abs().max() > 0.2, ratios


def zipf_batch(vocab, sentences, gen):
    """A batch as train.py builds it: whole target sentences (1-6 words from a Zipf unigram over the
    word ids 4.., each ending with </s>), sorted by length, flattened -> target [N]; and the unigram
    p_train [V] those words were drawn from (</s> once per sentence, as the vocabulary counts it)."""
    words = torch.arange(4, vocab)
    p_word = 1.0 / torch.arange(1, words.numel() + 1, dtype=torch.float64)
    p_word /= p_word.sum()
    lengths = torch.randint(1, 7, (sentences,), generator=gen).sort().values
    target = []
    for n in lengths.tolist():
        target += words[torch.multinomial(p_word, n, replacement=True, generator=gen)].tolist() + [EOS_ID]
    mean_len = 3.5
    prior = torch.zeros(vocab, dtype=torch.float64)
    prior[4:] = p_word * mean_len / (mean_len + 1)
    prior[EOS_ID] = 1 / (mean_len + 1)
    return torch.tensor(target), prior


@pytest.mark.parametrize("counts", ["batch", "unigram"])
def test_corrected_normaliser_is_unbiased_on_the_batch_as_it_is(counts):
    """-sampling_correction's claim: over the random draws, the mean of exp(gold logit) + the sum over
    the candidates of exp(logit_j - log E_i(j)) is the full softmax's normaliser, for every token of a
    batch built like train.py's (own sentence in the batch, one </s> per sentence, sorted by length,
    rare words). True of counts="batch" within Monte Carlo error; the unigram rule misses it by far."""
    vocab, gen = 24, torch.Generator().manual_seed(5)
    target, prior = zipf_batch(vocab, 6, gen)
    table = F.normalize(torch.randn(vocab, 8, generator=gen), dim=-1)
    table[0] = 0
    pred = 2.0 * torch.randn(target.numel(), 8, generator=gen)
    neg = Negatives(
        ("inbatch", "random", "gold_nn"),
        table,
        num_sampled=4,
        ann_candidates=3,
        log_prior=prior.clamp_min(1e-12).log().float(),
        counts=counts,
    )
    logits = pred @ table.t()  # [N, V]
    full = logits[:, 1:].exp().sum(1)  # every word but padding, the gold word included
    torch.manual_seed(0)
    draws, total = 4000, torch.zeros(target.numel(), dtype=torch.float64)
    for _ in range(draws):
        shared, per_token = neg(None, target)
        shared, repeats = unique_shared(shared, per_token.size(1))
        dots = candidate_dots(pred, table, shared, per_token) - neg.log_expected_counts(target, shared, per_token)
        dots = (dots + repeats).masked_fill(invalid(target, shared, per_token), float("-inf"))
        gold = logits.gather(1, target.unsqueeze(1)).squeeze(1)
        total += (gold.exp() + dots.exp().sum(1)).double()
    ratio = total / draws / full.double()
    if counts == "batch":
        assert (ratio - 1).abs().max() < 0.05, ratio
    else:
        assert (ratio - 1).abs().max() > 0.3, ratio


def bin_push(num_sampled, vocab=300, batches=400):
    """How hard the sampled negatives (in-batch, -num_sampled uniform, 3 gold neighbours; the unigram rule on the
    true unigram) push the word biases of the 10 most frequent words, the next 40, the rest, and </s>, over the full
    softmax's push (lab/bench/correction_push.py's measure): summed over ``batches`` batches of 8 Zipf sentences, each
    token's prediction near its gold word's own vector, the loss's own gradient on each negative's logit."""
    gen = torch.Generator().manual_seed(7)
    table = F.normalize(torch.randn(vocab, 8, generator=gen), dim=-1)
    table[0] = 0
    near = torch.randn(vocab, 8, generator=gen)  # where a token of each gold word points
    _, prior = zipf_batch(vocab, 1, gen)
    neg = Negatives(
        ("inbatch", "random", "gold_nn"),
        table,
        num_sampled=num_sampled,
        ann_candidates=3,
        log_prior=prior.clamp_min(1e-12).log().float(),
        counts="unigram",
    )
    full, push = torch.zeros(vocab, dtype=torch.float64), torch.zeros(vocab, dtype=torch.float64)
    torch.manual_seed(0)
    for _ in range(batches):
        target, _ = zipf_batch(vocab, 8, gen)
        pred = 4 * F.normalize(near[target] + 0.7 * torch.randn(target.numel(), 8, generator=gen), dim=-1)
        logits = (pred @ table.t()).double()
        logits[:, 0] = float("-inf")
        p = logits.softmax(1)
        p[torch.arange(target.numel()), target] = 0  # the gold word's own entry is no negative's push
        full += p.sum(0)
        shared, per_token = neg(None, target)
        shared, repeats = unique_shared(shared, per_token.size(1))
        dots = candidate_dots(pred, table, shared, per_token).double().requires_grad_()
        loss = _corrected_cross_entropy(
            (pred * table[target]).sum(1).double(), dots, target, neg, shared, per_token, repeats, True
        )
        (weight,) = torch.autograd.grad(loss.sum(), dots)
        ids = candidate_ids(torch.arange(dots.size(1)).expand_as(dots), shared, per_token).clamp_min(0)
        push.index_add_(0, ids.flatten(), weight.flatten())
    order = prior[4:].argsort(descending=True) + 4
    bins = [order[:10], order[10:50], order[50:], torch.tensor([EOS_ID])]
    return torch.stack([push[b].sum() / full[b].sum() for b in bins])


def test_enough_random_negatives_push_every_bin_as_the_full_softmax():
    """The sampled softmax divides by a sampled normaliser, and a random draw of weight 1/E = (V - 1)/num_sampled
    swings it: with 4 random negatives over 300 words some bin is pushed 15% off the full softmax's push (here 1.24 /
    1.16 / 0.97 / 1.32), with 128 every bin within 1.05 (0.99 / 1.00 / 1.00 / 1.03). On real batches 2,048 draws over
    9.8K words do the same (docs/results.md, "The sampling correction's expected counts")."""
    few, many = bin_push(4), bin_push(128)
    assert (few - 1).abs().max() > 0.15, few
    assert (many - 1).abs().max() < 0.05, many


def opt_of(loss, **kw):
    base = {
        "loss": loss,
        "margin": 0.5,
        "num_negatives": None,
        "negatives": "inbatch,random",
        "num_sampled": 3,
        "ann_candidates": 2,
        "temperature": 0.5,
        "contrastive_weight": 1.0,
        "lambda1": 0.02,
        "lambda2": 0.1,
        "vmf_approx": False,
        "sampling_correction": False,
    }
    return Namespace(**{**base, **kw})


@pytest.mark.parametrize("loss", ["infonce", "nllvmf_nce"])
def test_correction_by_hand(loss):
    """The corrected loss is the cross-entropy over {gold} and the negatives with each negative's
    logit minus log E(j); recomputed here from the same random draws."""
    pred = torch.tensor([[0.5, 1.0, 0.2], [0.1, 0.3, 1.5]])
    target = torch.tensor([4, 5])
    torch.manual_seed(3)
    got = build_loss(opt_of(loss, sampling_correction=True), TABLE, PRIOR)(pred, target)
    torch.manual_seed(3)
    drawn = torch.randint(1, 6, (3,))
    shared = torch.cat([target, drawn])
    p = PRIOR.double().exp()
    for i in range(2):
        vec, scale = (F.normalize(pred[i], dim=0), 0.5) if loss == "infonce" else (pred[i], 1.0)

        def logit(j, vec=vec, scale=scale):
            return (vec @ TABLE[j]).item() / scale

        terms = [logit(target[i].item())]
        terms += [logit(j) - math.log(2 * p[j].item() + 3 / 5) for j in shared.tolist() if j != target[i]]
        ce = math.log(sum(math.exp(t) for t in terms)) - terms[0]
        if loss == "nllvmf_nce":
            torch.manual_seed(3)
            plain = build_loss(opt_of("nllvmf_nce", contrastive_weight=0.0), TABLE)(pred, target)
            ce += plain[i].item()
        assert got[i].item() == pytest.approx(ce, rel=1e-5)


def test_correction_estimates_the_full_softmax():
    """Over many draws of uniform negatives, exp(gold) + Σ exp(logit_j − log E(j)) averages to the
    full softmax's normaliser: the mean corrected loss approaches the exact cross-entropy (the
    uncorrected one does not)."""
    gen = torch.Generator().manual_seed(0)
    vocab, m = 200, 8
    table = F.normalize(torch.randn(vocab, m, generator=gen), dim=-1)
    table[0] = 0
    pred = torch.randn(1, m, generator=gen)
    target = torch.tensor([7])
    logits = F.normalize(pred, dim=-1) @ table[1:].t() / 0.3
    exact = (torch.logsumexp(logits, 1) - logits[0, 6]).item()
    torch.manual_seed(0)
    z = []
    opt = opt_of("infonce", negatives="random", num_sampled=50, temperature=0.3, sampling_correction=True)
    loss = build_loss(opt, table, torch.zeros(vocab))
    for _ in range(400):
        z.append(loss(pred, target).exp().item())  # the estimated normaliser / exp(gold)
    mean_z = sum(z) / len(z)
    assert math.log(mean_z) == pytest.approx(exact, abs=0.05)
    torch.manual_seed(0)
    plain = build_loss(opt_of("infonce", negatives="random", num_sampled=50, temperature=0.3), table)
    assert abs(plain(pred, target).item() - exact) > 0.5


def test_correction_is_neutral_for_exact():
    """-negatives exact draws every word once (E = 1): the correction changes nothing."""
    pred, target = torch.randn(3, 3), torch.tensor([1, 4, 5])
    a = build_loss(opt_of("infonce", negatives="exact", sampling_correction=True), TABLE, PRIOR)(pred, target)
    b = build_loss(opt_of("infonce", negatives="exact"), TABLE)(pred, target)
    torch.testing.assert_close(a, b)


# --- the learned bias -------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["infonce", "nllvmf_nce"])
def test_word_bias_logits_and_gradient(loss):
    """A zero bias changes nothing; a bias enters the logits (infonce: (cos + b)/τ, nllvmf_nce:
    êᵀe + b); only the gold words' and the candidates' entries get a gradient."""
    pred, target = torch.tensor([[0.5, 1.0, 0.2], [0.1, 0.3, 1.5]]), torch.tensor([4, 5])
    fn = build_loss(opt_of(loss, negatives="inbatch"), TABLE)
    zero = torch.zeros(6, requires_grad=True)
    torch.testing.assert_close(fn(BiasedVector(pred, zero), target), fn(pred, target))
    bias = torch.tensor([0.0, 0.0, 0.0, 0.0, 2.0, 0.0], requires_grad=True)
    got = fn(BiasedVector(pred, bias), target)
    got.sum().backward()
    scale = 0.5 if loss == "infonce" else 1.0
    vec = F.normalize(pred, dim=-1) if loss == "infonce" else pred
    l0, l1 = (vec @ TABLE[[4, 5]].t()).unbind(1)
    want1 = torch.logsumexp(torch.stack([(l1[1] / scale), (l0[1] + 2) / scale]), 0) - l1[1] / scale
    if loss == "nllvmf_nce":
        want1 = want1 + fn(pred, target)[1] - (torch.logsumexp(torch.stack([l1[1], l0[1]]), 0) - l1[1])
    assert got[1].item() == pytest.approx(want1.item(), rel=1e-5)
    assert bias.grad[[0, 1, 2, 3]].abs().sum() == 0 and bias.grad[[4, 5]].abs().min() > 0


def test_generator_bias_in_scores_and_forward():
    gen = ContinuousGenerator(4, TABLE.clone(), criterion="cosine", word_bias=True)
    dec = torch.randn(2, 4)
    assert isinstance(gen(dec, gold=torch.tensor([1, 2])), BiasedVector)
    out = gen(dec)  # decoding: the plain vector
    assert isinstance(out, torch.Tensor)
    base = gen.scores(out)
    with torch.no_grad():
        gen.bias[3] = 5.0
    shifted = gen.scores(out)
    torch.testing.assert_close(shifted[:, 3], base[:, 3] + 5)
    assert (shifted.argmax(-1) == 3).all()


# --- decoding re-scorings --------------------------------------------------------------------------


@pytest.mark.parametrize("criterion", ["vmf", "cosine", "l2"])
def test_prior_and_csls_scores(criterion):
    gen = ContinuousGenerator(4, TABLE.clone(), criterion=criterion)
    out = gen(torch.randn(3, 4))
    base = gen.scores(out)
    gen.set_prior(PRIOR, 0.5)
    torch.testing.assert_close(gen.scores(out)[:, 1:], base[:, 1:] + 0.5 * PRIOR[1:])
    # a negative beta rewards rare words, but not <unk> (rare only because the vocabulary covers
    # nearly everything): it takes the most frequent word's term, so it gains on no word
    gen.set_prior(PRIOR, -0.5)
    torch.testing.assert_close(gen.scores(out)[:, 2:], base[:, 2:] - 0.5 * PRIOR[2:])
    torch.testing.assert_close(gen.scores(out)[:, 1], base[:, 1] - 0.5 * PRIOR[5])
    gen.set_prior(None, 0.5)
    gen.set_csls(2)
    r = table_hubness(TABLE, 2)
    norm = out.norm(dim=-1, keepdim=True)
    scale = {"vmf": norm / 2, "cosine": 0.5, "l2": norm}[criterion]
    torch.testing.assert_close(gen.scores(out)[:, 1:], base[:, 1:] - scale * r[1:])
    # CSLS's ranking: 2·cos − r(w)
    cos = F.normalize(out, dim=-1) @ TABLE[1:].t()
    assert torch.equal(gen.scores(out)[:, 1:].argmax(-1), (2 * cos - r[1:]).argmax(-1))


def test_table_hubness_brute_force():
    gen = torch.Generator().manual_seed(1)
    table = F.normalize(torch.randn(30, 5, generator=gen), dim=-1)
    table[0] = 0
    got = table_hubness(table, 4, chunk=7)
    for w in range(1, 30):
        cos = sorted(((table[w] @ table[j]).item() for j in range(1, 30) if j != w), reverse=True)
        assert got[w].item() == pytest.approx(sum(cos[:4]) / 4, abs=1e-6)
    assert got[0] == 0


# --- end to end: train.py and translate.py ------------------------------------------------------------


@pytest.fixture(scope="module")
def data(wc_data):
    """The memorisation corpus with a 16-d table: conftest's, which its trained models share."""
    return wc_data


@pytest.mark.parametrize(
    "loss,extra,decrease",
    [
        ("infonce", {}, 0.3),
        ("nllvmf_nce", {"lambda1": "0", "lambda2": "1"}, 1.0),
        ("nllvmf_nce", {"lambda1": "0", "lambda2": "1", "expected_counts": "sentence"}, 1.0),
    ],
)
def test_train_learns_with_both(data, tmp_path, loss, extra, decrease):
    """As test_train's matrix: 8 epochs of 4 batches, each report the mean over one epoch; NLLvMF
    unregularised so that its fall is visible (see test_matrix_learns)."""
    run = run_train(
        data,
        tmp_path,
        loss=loss,
        word_bias=True,
        sampling_correction=True,
        **{**WC, "epochs": "8", "report_every": "4", **extra},
    )
    losses = reported_losses(tmp_path / "train.log")
    assert len(losses) == 8 and (losses[-1] + losses[-2]) / 2 < losses[0] - decrease, losses
    bias = run.model.generator.bias
    assert bias.abs().sum() > 0  # learned
    assert "-word_bias -sampling_correction" in (tmp_path / "train.log").read_text()
    ckpt = load_checkpoint(str(tmp_path / "m_last.pt"))
    assert "generator.bias" in ckpt["model"] and ckpt["opt"]["word_bias"] and ckpt["opt"]["sampling_correction"]


def test_flags_survive_train_from(data, tmp_path, monkeypatch, capsys):
    """Resumed without repeating the flags, the run keeps them and takes the same steps."""
    from tests.helpers import record_steps

    seen = record_steps(monkeypatch)
    common = {**WC, "loss": "nllvmf_nce", "train_steps": "8", "epochs": "5"}
    full = run_train(
        data, tmp_path / "full", word_bias=True, sampling_correction=True, expected_counts="batch", **common
    )
    reference = dict(seen)
    seen.clear()
    resumed = run_train(data, tmp_path / "res", train_from=str(tmp_path / "full" / "m_step_4.pt"), **common)
    assert resumed.opt.word_bias and resumed.opt.sampling_correction and resumed.opt.expected_counts == "batch"
    assert [v for _, v in seen] == [reference[s] for s, _ in seen] and len(seen) == 4
    torch.testing.assert_close(resumed.model.generator.bias, full.model.generator.bias, rtol=0, atol=0)
    # a checkpoint from before -expected_counts was trained with the unigram rule, and goes on with it
    old = torch.load(tmp_path / "full" / "m_step_4.pt", weights_only=True)
    del old["opt"]["expected_counts"]
    torch.save(old, tmp_path / "old_step_4.pt")
    from tests.helpers import argv

    (tmp_path / "old").mkdir()
    fails(
        capsys,
        argv(data, tmp_path / "old", train_from=str(tmp_path / "old_step_4.pt"), expected_counts="batch", **common),
        "-expected_counts batch conflicts",
        "trained with -expected_counts unigram",
    )


@pytest.mark.parametrize(
    "extra,needles",
    [
        ({"loss": "nllvmf", "word_bias": True}, ["-word_bias changes the logits", "not -loss nllvmf"]),
        ({"loss": "maxmargin", "sampling_correction": True}, ["-sampling_correction", "not -loss maxmargin"]),
    ],
)
def test_bad_combinations(data, tmp_path, capsys, extra, needles):
    from tests.helpers import argv

    fails(capsys, argv(data, tmp_path, **{**WC, **extra}), *needles)
    assert not list(tmp_path.iterdir())


def test_correction_needs_sentence_counts(data, tmp_path, capsys):
    """A vocabulary of an older preprocess.py (no sentence count): a clear error, nothing written."""
    from tests.helpers import argv

    old = dict(torch.load(data["prefix"] + ".vocab.pt", weights_only=True))
    old["tgt"] = {k: v for k, v in old["tgt"].items() if k != "sentences"}
    d = tmp_path / "old"
    d.mkdir()
    for f in data["dir"].iterdir():
        if f.name.startswith("d."):
            (d / f.name).write_bytes(f.read_bytes())
    torch.save(old, d / "d.vocab.pt")
    out = tmp_path / "out"
    out.mkdir()
    ds = {**data, "prefix": str(d / "d")}
    fails(
        capsys,
        argv(ds, out, **{**WC, "loss": "infonce", "sampling_correction": True}),
        "-sampling_correction -expected_counts unigram",
        "rerun preprocess.py",
    )
    assert not list(out.iterdir())
    # the batch counts need no training counts
    run_train(
        ds,
        out,
        **{**WC, "loss": "infonce", "sampling_correction": True, "expected_counts": "batch", "train_steps": "2"},
    )
    assert (out / "m_last.pt").exists()


def test_translate_prior_and_csls(data, wc_infonce, wc_ce, tmp_path, capsys):
    """A huge prior makes the model write the most frequent training word everywhere; CSLS runs;
    both are refused for a softmax model with the reason."""
    model = wc_infonce
    translate.main(translate_args(model, data, tmp_path / "plain.txt"))
    greedy = ["-beam_size", "1", "-block_ngram_repeat", "0"]  # no blocking: the same word may repeat
    translate.main(translate_args(model, data, tmp_path / "prior.txt", "-decode_prior", "1000", *greedy))
    translate.main(translate_args(model, data, tmp_path / "csls.txt", "-csls", "3"))
    vocab = load_checkpoint(str(model))["vocab"]
    counts = vocab["tgt_counts"]
    top = vocab["tgt"][max(range(4, len(counts)), key=counts.__getitem__)]
    prior_words = set((tmp_path / "prior.txt").read_text().split())
    assert prior_words == {top}, prior_words
    assert (tmp_path / "plain.txt").read_text() != (tmp_path / "prior.txt").read_text()
    # a negative beta (word_choice.sh's grid has -0.25 and -0.1) pulls the other way: the rarest words
    translate.main(translate_args(model, data, tmp_path / "rare.txt", "-decode_prior", "-1000", *greedy))
    rarest = {vocab["tgt"][i] for i in range(4, len(counts)) if counts[i] == min(counts[4:])}
    rare_words = set((tmp_path / "rare.txt").read_text().split())
    assert rare_words and rare_words <= rarest, (rare_words, rarest)
    assert len((tmp_path / "csls.txt").read_text().splitlines()) == 8
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        translate.main(translate_args(wc_ce, data, tmp_path / "x.txt", "-decode_prior", "1"))
    assert exc.value.code == 2 and "this model has a softmax" in capsys.readouterr().err
    assert not (tmp_path / "x.txt").exists()
    with pytest.raises(SystemExit):
        translate.main(translate_args(model, data, tmp_path / "y.txt", "-csls", "-1"))
    assert "-csls must be at least 0" in capsys.readouterr().err


def test_translate_capped_prior(data, wc_infonce, tmp_path, capsys):
    """-decode_prior_cap K with a huge beta: no word seen fewer than K times is written, and the
    frequent words are not all turned into the most frequent one (as the plain prior does); bad
    values are refused before any output."""
    model = wc_infonce
    vocab = load_checkpoint(str(model))["vocab"]
    counts = dict(zip(vocab["tgt"], vocab["tgt_counts"], strict=True))
    cap = sorted(counts[w] for w in vocab["tgt"][4:])[len(counts) // 2]  # about half the words are rarer
    translate.main(translate_args(model, data, tmp_path / "plain.txt"))
    translate.main(
        translate_args(model, data, tmp_path / "capped.txt", "-decode_prior", "1000", "-decode_prior_cap", str(cap))
    )
    words = (tmp_path / "capped.txt").read_text().split()
    assert words and all(counts[w] >= cap for w in words), [w for w in words if counts[w] < cap]
    plain = (tmp_path / "plain.txt").read_text().split()
    assert any(counts[w] < cap for w in plain)  # else the test shows nothing
    assert len(set(words)) > 1  # not the plain prior's single most frequent word
    capsys.readouterr()
    for extra, message in [
        (["-decode_prior_cap", "5"], "give -decode_prior too"),
        (["-decode_prior", "1", "-decode_prior_cap", "1"], "at least 2"),
    ]:
        with pytest.raises(SystemExit) as exc:
            translate.main(translate_args(model, data, tmp_path / "bad.txt", *extra))
        assert exc.value.code == 2 and message in capsys.readouterr().err
        assert not (tmp_path / "bad.txt").exists()


def test_prior_needs_counts_in_the_checkpoint(data, wc_infonce, tmp_path, capsys):
    """A checkpoint written before the counts were saved: a clear error, no output."""
    ckpt = torch.load(wc_infonce, weights_only=True)
    for k in ("tgt_counts", "tgt_total_tokens", "tgt_sentences"):
        del ckpt["vocab"][k]
    torch.save(ckpt, tmp_path / "old.pt")
    with pytest.raises(SystemExit) as exc:
        translate.main(translate_args(tmp_path / "old.pt", data, tmp_path / "o.txt", "-decode_prior", "0.5"))
    assert exc.value.code == 2 and "no training counts" in capsys.readouterr().err
    assert not (tmp_path / "o.txt").exists()
    translate.main(translate_args(tmp_path / "old.pt", data, tmp_path / "o.txt"))  # without it: fine


def test_eos_and_unk_in_prior():
    """</s> gets one count per sentence, so the prior does not favour ending early or late for nothing."""
    vocab = Vocab(["<blank>", "<unk>", "<s>", "</s>", "a"], [0, 0, 0, 0, 9], total_tokens=9, sentences=3)
    lp = unigram_log_prior(vocab)
    assert lp[EOS_ID] == pytest.approx(math.log(4 / 17)) and lp[UNK_ID] == pytest.approx(math.log(1 / 17))


# --- tools/average_models.py -----------------------------------------------------------------------


def test_average_models(data, tmp_path, capsys):
    """The average of the last 2 epoch checkpoints is their parameters' mean; it translates; the
    tool refuses checkpoints of different models and too few files, writing nothing."""
    from tests.helpers import load_tool

    avg = load_tool("average_models")
    run_train(data, tmp_path, loss="infonce", save_checkpoint_epochs="1", **{**WC, "epochs": "3"})
    avg.main(["-last", "2", "-prefix", str(tmp_path / "m"), "-output", str(tmp_path / "avg.pt")])
    a, b = (torch.load(tmp_path / f"m_epoch_{e}.pt", weights_only=True) for e in (2, 3))
    got = torch.load(tmp_path / "avg.pt", weights_only=True)
    for k, v in got["model"].items():
        torch.testing.assert_close(v, (a["model"][k] + b["model"][k]) / 2)
    assert got["optim"] is None and got["averaged"] == ["m_epoch_2.pt", "m_epoch_3.pt"]
    assert not torch.equal(a["model"]["generator.proj.weight"], b["model"]["generator.proj.weight"])
    translate.main(translate_args(tmp_path / "avg.pt", data, tmp_path / "avg.txt"))
    assert len((tmp_path / "avg.txt").read_text().splitlines()) == 8
    run_train(data, tmp_path / "other", loss="infonce", **{**WC, "epochs": "1", "rnn_size": "16"})
    capsys.readouterr()
    for args, needle in (
        (["-models", str(tmp_path / "m_epoch_2.pt"), str(tmp_path / "other" / "m_last.pt")], "-rnn_size 16 but"),
        (["-last", "4", "-prefix", str(tmp_path / "m")], "found 3 checkpoint(s)"),
    ):
        with pytest.raises(SystemExit) as exc:
            avg.main([*args, "-output", str(tmp_path / "bad.pt")])
        assert exc.value.code == 2 and needle in capsys.readouterr().err
        assert not (tmp_path / "bad.pt").exists()


# --- embeddings_to_torch.py -init softmax ------------------------------------------------------------


def test_table_from_softmax_model(data, tmp_path, capsys):
    """The rows of a trained softmax layer, aligned by word and made unit length; a continuous model
    trains on that table; a continuous checkpoint or a missing -from_model is refused."""
    from onmt_cont.bin import embeddings_to_torch

    run_train(data, tmp_path / "ce", loss="ce", **{**WC, "tie_emb": False, "epochs": "1"})
    ckpt = tmp_path / "ce" / "m_last.pt"
    base = ["-dict_file", data["prefix"] + ".vocab.pt", "-output_file", str(tmp_path / "sm"), "-init", "softmax"]
    embeddings_to_torch.main([*base, "-from_model", str(ckpt), "-normalize"])
    table = torch.load(tmp_path / "sm.dec.pt", weights_only=True)
    weight = torch.load(ckpt, weights_only=True)["model"]["generator.proj.weight"]
    assert table.shape == (data["tgt_vocab_size"], 32)  # -rnn_size of the ce model
    torch.testing.assert_close(table[1:], F.normalize(weight[1:], dim=-1))
    assert table[0].abs().sum() == 0
    run_train(data, tmp_path / "cont", loss="infonce", **{**WC, "epochs": "1", "tgt_emb": str(tmp_path / "sm.dec.pt")})
    capsys.readouterr()
    for args, needle in (
        ([*base, "-from_model", str(tmp_path / "cont" / "m_last.pt")], "expected a checkpoint of a softmax model"),
        (base, "-init softmax takes its rows from -from_model"),
        ([*base, "-from_model", str(ckpt), "-unk_vector", "average"], "-unk_vector average"),
    ):
        with pytest.raises(SystemExit) as exc:
            embeddings_to_torch.main([*args[:3], str(tmp_path / "bad"), *args[4:]])
        assert exc.value.code == 2 and needle in capsys.readouterr().err
        assert not list(tmp_path.glob("bad*"))


# --- -train_table ---------------------------------------------------------------------------------


def test_train_table_gradient_reaches_only_the_candidates():
    """With in-batch negatives only, one SGD step moves exactly the rows of the batch's gold words;
    after_update puts them back to unit length and leaves the padding row zero."""
    gen_ = torch.Generator().manual_seed(3)
    table = F.normalize(torch.randn(12, 6, generator=gen_), dim=-1)
    table[0] = 0
    gen = ContinuousGenerator(5, table, criterion="vmf", train_table=True)
    assert gen.trains_table and gen.table is not table and torch.equal(gen.table, table)
    loss_fn = build_loss(opt_of("nllvmf_nce", negatives="inbatch"), gen.table)
    target = torch.tensor([3, 5, 5, 9])
    loss_fn(gen(torch.randn(4, 5, generator=gen_)), target).sum().backward()
    moved = (gen.table.grad.abs().sum(-1) > 0).nonzero().flatten().tolist()
    assert moved == [3, 5, 9]
    with torch.no_grad():
        gen.table -= 0.5 * gen.table.grad
    assert not torch.allclose(gen.table.norm(dim=-1)[moved], torch.ones(3))
    gen.after_update()
    torch.testing.assert_close(gen.table.norm(dim=-1)[1:], torch.ones(11))
    assert gen.table[0].abs().sum() == 0
    untouched = [i for i in range(12) if i not in moved]
    assert torch.equal(gen.table[untouched], table[untouched])


def test_train_table_leaves_the_other_initial_values():
    """The table is not drawn by -param_init (or -param_init_glorot): every other parameter starts
    as without the flag, and the table starts as the pretrained vectors."""
    from onmt_cont.models.model import build_model
    from tests.helpers import model_opts

    table = F.normalize(torch.randn(11, 16, generator=torch.Generator().manual_seed(0)), dim=-1)
    for glorot in (False, True):
        models = []
        for flag in (True, False):
            torch.manual_seed(1)
            opt = model_opts(loss="nllvmf_nce", tie_emb=True, train_table=flag, param_init_glorot=glorot)
            models.append(build_model(opt, 9, 11, table))
        a, b = (m.state_dict() for m in models)
        assert a.keys() == b.keys()
        for name in a:
            assert torch.equal(a[name], b[name]), name
        assert isinstance(models[0].generator.table, torch.nn.Parameter)
        assert not isinstance(models[1].generator.table, torch.nn.Parameter)


def test_train_table_trains_resumes_and_translates(data, tmp_path, capsys, monkeypatch):
    """The checkpoint's output table moved and has unit rows, the decoder's tied input table is
    still the pretrained one; -train_from resumes bit for bit (with -average_decay, which leaves the
    table out); an average of checkpoints is put back on the sphere when loaded, and translates."""
    from tests.helpers import load_tool, record_steps

    seen = record_steps(monkeypatch)
    common = {
        **WC,
        "loss": "nllvmf_nce",
        "train_steps": "8",
        "epochs": "5",
        "average_decay": "0.1",
        "word_bias": True,
        "sampling_correction": True,
    }
    full = run_train(data, tmp_path / "full", train_table=True, **common)
    assert "-train_table" in (tmp_path / "full" / "train.log").read_text()
    pretrained = F.normalize(torch.load(data["emb"], weights_only=True), dim=-1, eps=1e-12)  # as build_model
    ckpt = torch.load(tmp_path / "full" / "m_last.pt", weights_only=True)
    trained = ckpt["model"]["generator.table"]
    assert not torch.allclose(trained, pretrained, atol=1e-3)
    torch.testing.assert_close(trained[1:].norm(dim=-1), torch.ones(len(trained) - 1))
    assert torch.equal(ckpt["model"]["decoder.embeddings.table.weight"], pretrained)
    assert "generator.table" not in ckpt["train_model"]  # not averaged: the model's own
    reference = dict(seen)
    seen.clear()
    resumed = run_train(data, tmp_path / "res", train_from=str(tmp_path / "full" / "m_step_4.pt"), **common)
    assert resumed.opt.train_table
    assert [v for _, v in seen] == [reference[s] for s, _ in seen] and len(seen) == 4
    torch.testing.assert_close(resumed.model.generator.table, full.model.generator.table, rtol=0, atol=0)

    avg = load_tool("average_models")
    avg.main(
        [
            "-models",
            str(tmp_path / "full" / "m_step_4.pt"),
            str(tmp_path / "full" / "m_step_8.pt"),
            "-output",
            str(tmp_path / "avg.pt"),
        ]
    )
    mean = torch.load(tmp_path / "avg.pt", weights_only=True)["model"]["generator.table"]
    assert (mean[1:].norm(dim=-1) < 1 - 1e-5).any()  # the mean of two unit rows is shorter
    model, *_ = model_from_checkpoint(torch.load(tmp_path / "avg.pt", weights_only=True))
    torch.testing.assert_close(model.generator.table[1:].norm(dim=-1), torch.ones(len(mean) - 1))
    translate.main(translate_args(tmp_path / "avg.pt", data, tmp_path / "avg.txt"))
    assert len((tmp_path / "avg.txt").read_text().splitlines()) == 8

    from onmt_cont.translate.open_vocab import extend_model
    from onmt_cont.utils.errors import UserError

    model, _, _, tgt_vocab = model_from_checkpoint(ckpt)
    model.generator.bias = None  # the table alone must refuse
    with pytest.raises(UserError, match="-train_table"):
        extend_model(model, tgt_vocab, ["zebra"], torch.randn(1, 16))


def test_train_table_needs_a_contrastive_loss(data, tmp_path, capsys):
    from tests.helpers import argv

    fails(
        capsys,
        argv(data, tmp_path, **{**WC, "loss": "nllvmf", "train_table": True}),
        "-train_table trains the target table",
        "not -loss nllvmf",
    )
    assert not list(tmp_path.iterdir())


def test_table_lr_scale_moves_the_table_slower_and_survives_train_from(data, tmp_path, monkeypatch):
    """-table_lr_scale 0.1: Adam's first step moves each touched coordinate by about the learning
    rate, so the table's first step is about a tenth of the unscaled one; the table's group runs
    at 0.1x the schedule; -train_from, the flag left out, keeps the scale and resumes bit for bit."""
    from tests.helpers import record_steps

    pretrained = F.normalize(torch.load(data["emb"], weights_only=True), dim=-1, eps=1e-12)
    one = {**WC, "loss": "nllvmf_nce", "train_table": True, "train_steps": "1"}
    moved = {}
    for scale in ("1", "0.1"):
        run = run_train(data, tmp_path / f"one{scale}", table_lr_scale=scale, **one)
        moved[scale] = (run.model.generator.table - pretrained).abs().sum().item()
        lrs = [g["lr"] for g in run.optimizer.param_groups]
        assert lrs == pytest.approx([run.opt.learning_rate, run.opt.learning_rate * float(scale)])
    assert 0.07 < moved["0.1"] / moved["1"] < 0.13, moved
    assert "-table_lr_scale 0.1" in (tmp_path / "one0.1" / "train.log").read_text()

    seen = record_steps(monkeypatch)
    common = {
        **WC,
        "loss": "nllvmf_nce",
        "train_table": True,
        "train_steps": "8",
        "epochs": "5",
        "decay_method": "noam",
        "warmup_steps": "4",
        "learning_rate": "2",
    }
    full = run_train(data, tmp_path / "full", table_lr_scale="0.1", **common)
    reference = dict(seen)
    seen.clear()
    resumed = run_train(data, tmp_path / "res", train_from=str(tmp_path / "full" / "m_step_4.pt"), **common)
    assert resumed.opt.table_lr_scale == 0.1
    assert [v for _, v in seen] == [reference[s] for s, _ in seen] and len(seen) == 4
    torch.testing.assert_close(resumed.model.generator.table, full.model.generator.table, rtol=0, atol=0)
    lrs = [g["lr"] for g in resumed.optimizer.param_groups]
    assert lrs[1] == pytest.approx(0.1 * lrs[0])


def test_table_lr_scale_bad_values(data, tmp_path, capsys):
    from tests.helpers import argv

    base = {**WC, "loss": "nllvmf_nce"}
    fails(capsys, argv(data, tmp_path, **base, table_lr_scale="0.1"), "-table_lr_scale 0.1", "needs -train_table")
    for value in ("0", "-1"):
        fails(
            capsys,
            argv(data, tmp_path, **base, train_table=True, table_lr_scale=value),
            "-table_lr_scale must be positive",
            value,
        )
    assert not list(tmp_path.iterdir())


def test_prefix_negatives_train_and_resume(data, tmp_path, monkeypatch, capsys):
    """-negatives inbatch,prefix changes the losses against inbatch alone (the sample's targets
    repeat words within a sentence); a run resumed with the same options continues bit for bit;
    bad values are refused before anything is written."""
    from tests.helpers import argv, assert_resumed_exactly, record_steps

    common = {**WC, "loss": "nllvmf_nce", "train_steps": "8", "epochs": "5"}
    plain = run_train(data, tmp_path / "plain", negatives="inbatch", **common)
    seen = record_steps(monkeypatch)
    full = run_train(data, tmp_path / "full", negatives="inbatch,prefix", prefix_window="3", **common)
    reference = dict(seen)
    assert reported_losses(tmp_path / "full" / "train.log") != reported_losses(tmp_path / "plain" / "train.log")
    assert full.opt.negatives == "inbatch,prefix" and plain.opt.negatives == "inbatch"
    seen.clear()
    resumed = run_train(
        data,
        tmp_path / "res",
        train_from=str(tmp_path / "full" / "m_step_4.pt"),
        negatives="inbatch,prefix",
        prefix_window="3",
        **common,
    )
    assert_resumed_exactly(seen, reference, resumed, full, 4)
    capsys.readouterr()
    bad = tmp_path / "bad"
    bad.mkdir()
    fails(capsys, argv(data, bad, **common, prefix_window="3"), "-prefix_window", "add prefix to -negatives")
    fails(capsys, argv(data, bad, **common, negatives="prefix", prefix_window="0"), "-prefix_window must be at least 1")
    assert not list(bad.iterdir())


def test_faiss_is_needed_only_where_an_index_is_built(data, tmp_path, monkeypatch, capsys):
    """Without faiss-cpu, -negatives gold_nn and ann over a table of up to EXACT_UP_TO words train (exact
    search; the GPU run of docs/gpu.md failed 30 tests here on a check that asked for faiss whatever the
    table). Over a larger table (EXACT_UP_TO lowered to 4 here) train.py stops before the first step,
    names what needs faiss and how to install it, and writes nothing."""
    import sys

    from onmt_cont.losses import negatives
    from tests.helpers import argv

    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss now raises ImportError
    common = {**WC, "loss": "nllvmf_nce", "train_steps": "2"}
    for sources in ("gold_nn", "inbatch,ann"):
        trained = run_train(data, tmp_path / sources, negatives=sources, **common)
        assert trained.opt.negatives == sources
    monkeypatch.setattr(negatives, "EXACT_UP_TO", 4)
    bad = tmp_path / "bad"
    bad.mkdir()
    fails(
        capsys,
        argv(data, bad, **common, negatives="gold_nn"),
        "-negatives gold_nn over 16 target words on the CPU",
        "pip install faiss-cpu",
        "train on a GPU",
    )
    fails(
        capsys,
        argv(data, bad, **common, negatives="inbatch,ann"),
        "-negatives ann over 16 target words",
        "pip install faiss-cpu",
        "leave ann out of -negatives",
    )
    assert not list(bad.iterdir())


# --- lab/tools/time_to_quality.py and quality_report.py's calibration table ------------------------------


def write_log(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def test_stopping_rule_replays_train_py(tmp_path, capsys):
    """The tool replays train.py's rule on a log (a run and its continuation joined by a comma):
    patience 2 on each score stops at the dip; a window of 2 rides it out and runs past the log."""
    from tests.helpers import load_tool

    tool = load_tool("stopping_rule")
    v = "validation at step {}: loss 1.0; greedy BLEU {} (<unk> 0.0% of the output)"
    scores = [10.0, 20.0, 19.0, 19.5, 21.0, 20.5, 19.0, 18.0]
    lines = [f"[10:{i:02d}:00] {v.format(i, b)}" for i, b in enumerate(scores, 1)]
    write_log(tmp_path / "a" / "train.log", lines[:4])
    write_log(tmp_path / "b" / "train.log", lines[4:])
    tool.main(
        [
            "-patience",
            "2",
            "-windows",
            "1",
            "2",
            "-runs",
            f"{tmp_path / 'a' / 'train.log'},{tmp_path / 'b' / 'train.log'}",
        ]
    )
    row = capsys.readouterr().out.splitlines()[-1]
    # window 1: 19.0 and 19.5 do not beat 20.0: stop after 4; window 2: the mean of 20.0 and 19.0
    # (19.5) is a new best mean, so only 19.5 counts, and 21.0 comes in time
    assert row == "| a | 8 | 21.00 (5) | 4, 20.00 (2) | 8, 21.00 (5) |", row
    assert tool.replay(scores, 2, 2) == (8, 21.0, 5, True)  # means 10, 15, 19.5, 19.25, 20.25, 20.75, 19.75, 18.5
    assert tool.replay(scores, 3, 2) == (8, 21.0, 5, False)
    with pytest.raises(SystemExit) as exc:
        tool.main(["-windows", "0", "-runs", str(tmp_path / "a" / "train.log")])
    assert exc.value.code == 2 and "-windows must be at least 1" in capsys.readouterr().err


def test_stopping_window_never_stops_sooner():
    """One deep dip lowers `window` means in a row; counting the mean alone would stop there.
    The rule resets on a new best score or a new best mean, so it goes on wherever window 1 does."""
    from onmt_cont.train.stopping import track_validation

    def bad_counts(scores, window):
        pr = {"best_score": None, "bad_validations": 0, "recent_scores": [], "best_window": None}
        return [track_validation(pr, s, True, window) and 0 or pr["bad_validations"] for s in scores]

    dip = [30.0, 31.0, 20.0, 31.5, 32.0]  # means of 3 after the dip: 27.0, 27.5, 27.8 (< 30.5)
    assert bad_counts(dip, 1) == [0, 0, 1, 0, 0]
    assert bad_counts(dip, 3) == [0, 0, 1, 0, 0]
    plateau = [30.0, 33.0, 32.0, 32.5, 32.8, 32.9]  # each below 33, their mean of 3 still rising
    assert bad_counts(plateau, 1) == [0, 0, 1, 2, 3, 4]
    assert bad_counts(plateau, 3) == [0, 0, 0, 0, 1, 0]  # means 30, 31.5, 31.67, 32.5, 32.43, 32.73
    rng = torch.Generator().manual_seed(0)
    for _ in range(200):  # random curves: the window's count is never above window 1's
        curve = (torch.randn(30, generator=rng).cumsum(0) + torch.arange(30) * 0.3).tolist()
        assert all(a <= b for a, b in zip(bad_counts(curve, 3), bad_counts(curve, 1), strict=True))


def test_time_to_quality(tmp_path, capsys):
    from tests.helpers import load_tool

    ttq = load_tool("time_to_quality")
    v = "validation at step {}: loss 1.0; greedy BLEU {} (<unk> 0.0% of the output)"
    write_log(
        tmp_path / "ce" / "train.log",
        [
            "[23:59:00] start",
            f"[23:59:50] {v.format(1, 10.0)}",
            f"[00:01:40] {v.format(2, 30.0)}",
            f"[00:02:00] {v.format(3, 28.0)}",
        ],
    )
    write_log(
        tmp_path / "cont" / "train.log",
        ["[10:00:00] start", f"[10:00:30] {v.format(1, 20.0)}", f"[10:01:00] {v.format(2, 29.5)}"],
    )
    write_log(
        tmp_path / "slow" / "train.log",
        [
            "[10:00:00] start",
            f"[10:00:30] {v.format(1, 5.0)}",
            "[11:00:00] resumed from step 1 (epoch 2)",  # the pause: left out
            f"[11:00:10] {v.format(2, 6.0)}",
        ],
    )
    # -resume auto, in the order train.py writes it: its notes first, then "resumed from step" and the model
    write_log(
        tmp_path / "auto" / "train.log",
        [
            "[10:00:00] model: -encoder_type rnn -decoder_type rnn -loss ce",
            f"[10:00:30] {v.format(1, 5.0)}",
            "[11:00:00] -resume auto: found 1 checkpoint(s) of m: m_step_1.pt",  # the pause: left out
            "[11:00:01] -resume auto: continuing from m_step_1.pt, step 1, the furthest of them",
            "[11:00:02] resumed from step 1 (epoch 2)",
            "[11:00:03] model: -encoder_type rnn -decoder_type rnn",
            f"[11:00:10] {v.format(2, 6.0)}",
        ],
    )
    assert ttq.curve(str(tmp_path / "auto" / "train.log")) == [(30, 5.0), (37, 6.0)]  # start-up lines: no training
    ttq.main(
        [
            "-ref",
            str(tmp_path / "ce" / "train.log"),
            "-runs",
            str(tmp_path / "cont" / "train.log"),
            str(tmp_path / "slow" / "train.log"),
            "-plot",
            str(tmp_path / "p.png"),
        ]
    )
    out = capsys.readouterr().out
    assert "= 29.00" in out  # best 30 - 1
    assert "| ce | 30.00 | 160 | 1.00 |" in out  # across midnight: 23:59:00 -> 00:01:40
    assert "| cont | 29.50 | 60 | 0.38 |" in out and "| slow | 6.00 | not reached | – |" in out
    assert (tmp_path / "p.png").stat().st_size > 1000
    write_log(tmp_path / "none" / "train.log", ["[10:00:00] start"])
    with pytest.raises(SystemExit) as exc:
        ttq.main(["-ref", str(tmp_path / "none" / "train.log"), "-runs", str(tmp_path / "cont" / "train.log")])
    assert exc.value.code == 2 and "no 'greedy BLEU' validation lines" in capsys.readouterr().err


def test_time_to_quality_best_from(tmp_path, capsys):
    """A timed pair cut short: the target comes from the reference's full run, whose curve the timed
    reference must repeat; a different curve, a shorter full run or several -ref are refused."""
    from tests.helpers import load_tool

    ttq = load_tool("time_to_quality")
    v = "validation at step {}: loss 1.0; greedy BLEU {} (<unk> 0.0% of the output)"

    def log(name, scores, minutes=2):
        write_log(
            tmp_path / name / "train.log",
            ["[10:00:00] start"] + [f"[10:{i * minutes:02d}:00] {v.format(i, b)}" for i, b in enumerate(scores, 1)],
        )
        return str(tmp_path / name / "train.log")

    full = log("ce_full", [10.0, 25.0, 29.0, 31.0, 30.5])  # best 31: target 30
    timed = log("ce_timed", [10.0, 25.0, 29.0, 31.0])  # stopped after passing it
    cont = log("cont", [20.0, 30.2], minutes=3)
    cut = log("ce_cut", [10.0, 25.0, 29.0])
    ttq.main(["-ref", cut, "-runs", cont])
    assert "= 28.00" in capsys.readouterr().out  # cut before its best: on its own, the wrong target
    ttq.main(["-ref", cut, "-runs", cont, "-best_from", full])
    out = capsys.readouterr().out
    assert "ce_full's best validation BLEU 31.00 - 1 = 30.00" in out
    assert "| ce_cut | 29.00 | not reached | – |" in out  # the cut reference never got there
    ttq.main(["-ref", timed, "-runs", cont, "-best_from", full])
    out = capsys.readouterr().out
    assert "| ce_timed | 31.00 | 480 | 1.00 |" in out and "| cont | 30.20 | 360 | 0.75 |" in out, out
    for argv, msg in (
        (["-ref", log("other", [10.0, 24.0]), "-runs", cont, "-best_from", full], "validation 2 gives BLEU 24.00"),
        (["-ref", full, "-runs", cont, "-best_from", timed], "must be the longer, full run"),
        (["-ref", timed, full, "-runs", cont, "-best_from", full], "give one -ref"),
        (["-ref", timed, "-runs", cont, "-best_from", full, "-epoch_cost", "0.5"], "give one -ref"),
    ):
        with pytest.raises(SystemExit) as exc:
            ttq.main(argv)
        assert exc.value.code == 2 and msg in capsys.readouterr().err, argv


def test_time_to_quality_pairs(tmp_path, capsys):
    """Several references: every pair in validations to that reference's best − 1, scaled by
    -epoch_cost; the median and range over the pairs; bad values are refused."""
    from tests.helpers import load_tool

    ttq = load_tool("time_to_quality")
    v = "validation at step {}: loss 1.0; greedy BLEU {} (<unk> 0.0% of the output)"
    curves = {"ce1": [10, 30, 31], "ce2": [20, 25, 26, 40], "c1": [25, 30, 35, 40], "c2": [29.9, 30.1, 32, 33]}
    for name, scores in curves.items():
        write_log(
            tmp_path / name / "train.log",
            ["[10:00:00] start"] + [f"[10:0{i}:00] {v.format(i, b)}" for i, b in enumerate(scores, 1)],
        )
    log = {name: str(tmp_path / name / "train.log") for name in curves}
    ttq.main(["-ref", log["ce1"], log["ce2"], "-runs", log["c1"], log["c2"], "-epoch_cost", "0.5"])
    out = capsys.readouterr().out
    # ce1: target 30 at its 2nd validation; c1 reaches 30 at its 2nd (1.00), c2 at its 2nd (30.1)
    assert "| ce1 | 30.00 | 2 | c1 | 2 | 1.00 | 0.50 |" in out and "| ce1 | 30.00 | 2 | c2 | 2 | 1.00 | 0.50 |" in out
    # ce2: target 39 at its 4th; c1 at its 4th, c2 never
    assert "| ce2 | 39.00 | 4 | c1 | 4 | 1.00 | 0.50 |" in out
    assert "| ce2 | 39.00 | 4 | c2 | not reached | – | – |" in out
    assert (
        out.splitlines()[-1] == "x reference, time (validations x 0.5), over 3 pairs: median 0.50, range "
        "0.50-0.50; 1 pairs not reached"
    ), out
    ttq.main(["-ref", log["ce1"], log["ce2"], "-runs", log["c1"], "-margin", "5"])
    out = capsys.readouterr().out  # ce1: 26 at its 2nd, c1 at its 2nd; ce2: 35 at its 4th, c1 at its 3rd
    assert out.splitlines()[-1] == "x reference, validations, over 2 pairs: median 0.88, range 0.75-1.00", out
    ttq.main(["-ref", log["ce2"], "-runs", log["c1"], "-epoch_cost", "0.5"])  # one reference, in validations
    assert (
        capsys.readouterr().out.splitlines()[-1] == "x reference, time (validations x 0.5), over 1 pairs: "
        "median 0.50, range 0.50-0.50"
    )
    for argv, msg in (
        (["-ref", log["ce1"], log["ce2"], "-runs", log["c1"], "-epoch_cost", "0"], "positive number"),
        (["-ref", log["ce1"], "-runs", log["c1"], "-epoch_cost", "0.5", "-plot", "p.png"], "no -epoch_cost"),
        (["-ref", log["ce1"], log["ce2"], "-runs", log["c1"], "-plot", str(tmp_path / "p.png")], "give one -ref"),
    ):
        with pytest.raises(SystemExit) as exc:
            ttq.main(argv)
        assert exc.value.code == 2 and msg in capsys.readouterr().err


def test_quality_report_calibration(tmp_path, capsys):
    import json

    from tests.helpers import load_tool

    report = load_tool("quality_report")
    run = tmp_path / "t_x.s1"
    write_log(run / "train.log", ["[10:00:00] start", "[10:00:30] validation at step 1: greedy BLEU 12.5"])
    (run / "choice.txt").write_text("checkpoint model_avg.pt beta 0.25 valid_bleu 40.1 (model_best 39.0, ...)\n")
    for t, r in (("test_2016_flickr", 1.5), ("test_2017_flickr", 0.5)):
        (run / f"{t}.calibration.json").write_text(json.dumps({b: {"ratio": r} for b in ("1", "2-4", "5-9", "10-99")}))
    report.main([str(run)])
    out = capsys.readouterr().out
    assert (
        "| t_x.s1 | model_avg.pt, β 0.25 (val. 40.1) | 1.50 / 1.50 / 1.50 / 1.50 | 0.50 / 0.50 / 0.50 / 0.50 |" in out
    )


def test_quality_report_seed_means(tmp_path, capsys):
    """Rows with two or more seeds get mean ± sample std of BLEU with and without the lexicon and of
    the <unk> rate, and the mean calibration ratio per bin; a row with one seed gets none."""
    import json

    from tests.helpers import load_tool

    report = load_tool("quality_report")
    sig = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    runs = {"t_x.s1": (40.0, 30.0, 2.0, 1.0), "t_x.s2": (42.0, 31.0, 4.0, 0.5), "t_y.s1": (50.0, 50.0, 0.0, 1.0)}
    for name, (b16, b17, unk, ratio) in runs.items():
        run = tmp_path / name
        write_log(run / "train.log", ["[10:00:00] start", "[10:00:30] validation at step 1: greedy BLEU 12.5"])
        for t, b in (("test_2016_flickr", b16), ("test_2017_flickr", b17)):
            (run / f"{t}.bleu.txt").write_text(
                f"sacreBLEU (detokenized): {b:.2f}  {sig}\n"
                f"without -replace_unk (the model's own words, {unk:.1f}% <unk>): sacreBLEU {b - 1:.2f}  {sig}\n"
            )
            (run / f"{t}.calibration.json").write_text(
                json.dumps({b: {"ratio": ratio * (i + 1)} for i, b in enumerate(("1", "2-4", "5-9", "10-99"))})
            )
    report.main([str(tmp_path / n) for n in runs])
    out = capsys.readouterr().out
    assert (
        "| t_x (2 seeds) | 41.00 ± 1.41 | 30.50 ± 0.71 | 40.00 ± 1.41 / 29.50 ± 0.71 | 3.00 ± 1.41% "
        "| 0.75 / 1.50 / 2.25 / 3.00 | 0.75 / 1.50 / 2.25 / 3.00 |"
    ) in out
    assert "| t_y (" not in out
    (tmp_path / "t_x.s2" / "test_2017_flickr.calibration.json").unlink()  # a seed without its ratios: "–"
    report.main([str(tmp_path / n) for n in runs])
    assert "| 3.00 ± 1.41% | – | – |" in capsys.readouterr().out


def test_quality_report_calibration_against_a_reference_row(tmp_path, capsys):
    """-calibration_ref: each bin's mean ratio over the seeds divided by the reference row's, in the
    bins with enough reference tokens (and a non-zero reference ratio); beyond 1.3 marked."""
    import json

    from tests.helpers import load_tool

    report = load_tool("quality_report")
    bins = ("1", "2-4", "5-9", "10-99", "100-999", "1000+")
    refs = {"1": 40, "2-4": 80, "5-9": 80, "10-99": 900, "100-999": 3000, "1000+": 7000}
    ratios = {
        "t_ce.s1": [0.1, 0.6, 0.8, 1.0, 1.0, 1.0],
        "t_ce.s2": [0.1, 0.6, 0.8, 1.0, 0.0, 1.0],
        "t_c.s1": [0.5, 0.3, 0.8, 1.2, 1.0, 1.3],
        "t_c.s2": [0.7, 0.5, 0.8, 1.4, 1.0, 1.3],
    }
    for name, rs in ratios.items():
        run = tmp_path / name
        write_log(run / "train.log", ["[10:00:00] start", "[10:00:30] validation at step 1: greedy BLEU 12.5"])
        for t in ("test_2016_flickr", "test_2017_flickr"):
            (run / f"{t}.calibration.json").write_text(
                json.dumps({b: {"ref": refs[b], "ratio": r} for b, r in zip(bins, rs, strict=True)})
            )
    report.main(["-calibration_ref", "t_ce", *(str(tmp_path / n) for n in ratios)])
    out = capsys.readouterr().out
    # bin 1: 40 reference tokens (< 50): left out; 100-999: ce's mean ratio 0.5, ours 1.0 -> 2.00
    cells = "– / **0.67** / 1.00 / 1.30 / **2.00** / 1.30"
    assert f"| t_c (2 seeds) | {cells} | {cells} | 2.00 |" in out
    with pytest.raises(SystemExit, match="no run folder t_nope"):
        report.main(["-calibration_ref", "t_nope", str(tmp_path / "t_c.s1")])
    # -suffix / -ref_suffix: the other rows' .calib decodes against the reference row's step-4 decodes
    for name in ("t_c.s1", "t_c.s2"):
        for t in ("test_2016_flickr", "test_2017_flickr"):
            (tmp_path / name / f"{t}.calib.calibration.json").write_text(
                json.dumps(
                    {b: {"ref": refs[b], "ratio": r} for b, r in zip(bins, [0.1, 0.6, 0.8, 1.0, 0.5, 1.0], strict=True)}
                )
            )
    report.main(
        ["-calibration_ref", "t_ce", "-suffix", ".calib", "-ref_suffix", "", *(str(tmp_path / n) for n in ratios)]
    )
    cells = "– / 1.00 / 1.00 / 1.00 / 1.00 / 1.00"
    assert f"| t_c (2 seeds) | {cells} | {cells} | 1.00 |" in capsys.readouterr().out


def test_quality_report_outputs_and_correct_tokens_per_bin(tmp_path, capsys):
    """-calibration_ref also tabulates each row's mean output tokens per bin and how many of them are
    correct, from the counts lab/tools/rare_word_f1.py writes; files without them leave the table out."""
    import json

    from tests.helpers import load_tool

    report = load_tool("quality_report")
    bins = ("1", "2-4", "5-9", "10-99", "100-999", "1000+")
    counts = {"t_ce.s1": [(70, 6), (150, 46)], "t_c.s1": [(28, 12), (110, 49)], "t_c.s2": [(29, 11), (120, 50)]}
    for name, cs in counts.items():
        run = tmp_path / name
        write_log(run / "train.log", ["[10:00:00] start", "[10:00:30] validation at step 1: greedy BLEU 12.5"])
        cs = cs + [(100, 50)] * 4
        for t in ("test_2016_flickr", "test_2017_flickr"):
            (run / f"{t}.calibration.json").write_text(
                json.dumps(
                    {b: {"ref": 90, "hyp": h, "match": m, "ratio": h / 90} for b, (h, m) in zip(bins, cs, strict=True)}
                )
            )
    report.main(["-calibration_ref", "t_ce", *(str(tmp_path / n) for n in counts)])
    out = capsys.readouterr().out
    cells = "28 (12) / 115 (50) / 100 (50) / 100 (50)"  # means over the two seeds, rounded
    assert f"| t_c (2 seeds) | {cells} | {cells} |" in out, out
    assert "| t_ce (1 seeds) | 70 (6) / 150 (46) / 100 (50) / 100 (50) |" in out, out
    for t in ("test_2016_flickr", "test_2017_flickr"):  # an older file without the counts
        (tmp_path / "t_c.s2" / f"{t}.calibration.json").write_text(
            json.dumps({b: {"ref": 90, "ratio": 1.0} for b in bins})
        )
    report.main(["-calibration_ref", "t_ce", *(str(tmp_path / n) for n in counts)])
    out = capsys.readouterr().out
    assert "| t_c (1 seeds) | 28 (12) / 110 (49)" in out and "| t_c (2 seeds) | 28" not in out, out


def test_quality_report_suffix_reads_the_other_decodes(tmp_path, capsys):
    """-suffix .calib scores TEST.calib.bleu.txt and TEST.calib.calibration.json instead of step 4's files."""
    import json

    from tests.helpers import load_tool

    report = load_tool("quality_report")
    sig = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    run = tmp_path / "t_x.s1"
    write_log(run / "train.log", ["[10:00:00] start", "[10:00:30] validation at step 1: greedy BLEU 12.5"])
    for suffix, b, ratio in (("", 40.0, 0.5), (".calib", 41.0, 1.0)):
        for t in ("test_2016_flickr", "test_2017_flickr"):
            (run / f"{t}{suffix}.bleu.txt").write_text(
                f"sacreBLEU (detokenized): {b:.2f}  {sig}\n"
                f"without -replace_unk (the model's own words, 0.0% <unk>): sacreBLEU {b:.2f}  {sig}\n"
            )
            (run / f"{t}{suffix}.calibration.json").write_text(
                json.dumps({k: {"ratio": ratio} for k in ("1", "2-4", "5-9", "10-99")})
            )
    report.main([str(run)])
    assert "| t_x.s1 | 40.00 | 40.00 |" in capsys.readouterr().out
    report.main(["-suffix", ".calib", str(run)])
    out = capsys.readouterr().out
    assert "| t_x.s1 | 41.00 | 41.00 |" in out and "1.00 / 1.00 / 1.00 / 1.00" in out and "0.50" not in out


def test_quality_report_unfinished_decode_is_a_clear_error(tmp_path, capsys):
    """A TEST.bleu.txt without translate.py's two score lines (a decode still being written) names
    the file and what was expected, exit 2, instead of a traceback."""
    from tests.helpers import load_tool

    report = load_tool("quality_report")
    run = tmp_path / "t_x.s1"
    write_log(run / "train.log", ["[10:00:00] start", "[10:00:30] validation at step 1: greedy BLEU 12.5"])
    (run / "test_2016_flickr.bleu.txt").write_text("")
    with pytest.raises(SystemExit) as exc:
        report.main([str(run)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "test_2016_flickr.bleu.txt: expected translate.py's" in err, err


# --- -word_bias_update lazy -----------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [True, False])
def test_lazy_entries_keep_value_and_state(fused):
    """After a step in which only entry 0 has a gradient, the other entries have the value and the Adam state
    they had (dense Adam moves them on their momentum and decays it); entry 0 moves as dense Adam moves it."""
    from onmt_cont.train.optim import LazyEntries

    def run(lazy):
        p = torch.nn.Parameter(torch.zeros(4))
        opt = torch.optim.Adam([p], lr=0.1, fused=fused) if fused else torch.optim.Adam([p], lr=0.1, foreach=False)
        keeper = LazyEntries(opt, p)
        for grad in ([1.0, -2.0, 0.5, 3.0], [0.7, 0.0, 0.0, 0.0]):
            p.grad = torch.tensor(grad)
            kept = keeper.keep() if lazy else None
            if lazy and grad[1] == 0.0:
                before = p.detach().clone(), {k: v.clone() for k, v in opt.state[p].items()}
            opt.step()
            if lazy:
                keeper.restore(kept)
        return p.detach(), opt.state[p], (before if lazy else None)

    p_dense, _, _ = run(False)
    p_lazy, state, (p_before, state_before) = run(True)
    torch.testing.assert_close(p_lazy[1:], p_before[1:], rtol=0, atol=0)
    for k in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(state[k][1:], state_before[k][1:], rtol=0, atol=0)
    assert (p_dense[1:] != p_before[1:]).all()  # dense Adam moved them with no gradient
    torch.testing.assert_close(p_lazy[0], p_dense[0])


def test_train_lazy_bias(data, tmp_path, capsys):
    """-word_bias_update lazy trains, is kept by -train_from, and needs -word_bias."""
    from tests.helpers import argv

    run = run_train(
        data,
        tmp_path,
        loss="nllvmf_nce",
        word_bias=True,
        sampling_correction=True,
        word_bias_update="lazy",
        **{**WC, "epochs": "2"},
    )
    assert run.opt.word_bias_update == "lazy" and run.model.generator.bias.abs().sum() > 0
    assert load_checkpoint(str(tmp_path / "m_last.pt"))["opt"]["word_bias_update"] == "lazy"
    fails(
        capsys, argv(data, tmp_path / "no_bias", loss="nllvmf_nce", word_bias_update="lazy", **WC), "needs -word_bias"
    )
