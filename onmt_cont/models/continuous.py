"""The continuous generator: a predicted vector ê and nearest-neighbour word scores against the
unit-length target table (cosine, vMF or l2; the word bias, the decoding prior and the offsets;
beam search's distribution over the words). The softmax-side generators are in generators.py."""

from collections.abc import Callable
from typing import Protocol, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from onmt_cont.constants import PAD_ID, SPECIALS, UNK_ID
from onmt_cont.losses.negatives import search_chunk_rows
from onmt_cont.outputs import BiasedVector, prediction
from onmt_cont.vmf import log_cmk

# -train_table: how far from unit length a row may be before it is rescaled, after an update
# (float32 rounding of a normalised row is about 1e-7) and when a table is loaded (an average of
# checkpoints' unit rows is shorter)
ROUNDING, UNIT_TOLERANCE = 1e-6, 1e-5


class SearchIndex(Protocol):
    """An approximate nearest-neighbour index (:meth:`ContinuousGenerator.set_index`; onmt_cont.ann.FaissIndex)."""

    def search(self, queries: Tensor, k: int) -> Tensor: ...


def with_offsets(scores: Tensor, offsets: Tensor | None) -> Tensor:
    return scores if offsets is None else scores + offsets


class ContinuousGenerator(nn.Module):
    """Predicts a vector ê of the target embedding size m (``linear``: one layer; ``nonlinear``:
    Linear-ReLU-Linear) and scores words against the frozen unit-length table.

    ``criterion`` follows the training loss:

    - ``vmf``: the log vMF density log C_m(‖ê‖) + êᵀe(w) (argmax: the largest êᵀe(w));
    - ``cosine``: cos(ê, e(w));
    - ``l2``: −‖ê − e(w)‖².

    With a unit-length table all three pick the same nearest neighbour (never the zero padding
    row); they differ as beam scores, where a hypothesis scores the sum over its steps: the vMF
    log-density (a real log-likelihood: κ=‖ê‖ says how sure each step is), the sum of cosines
    (each in [−1, 1], mostly positive, so an unnormalised sum favours longer outputs), or the
    sum of −‖ê − e(w)‖² (always ≤ 0: favours shorter ones, like log-probabilities). Models
    trained with l2 decode by l2; max-margin and the other margin losses by cosine
    (``losses.decode_criterion``).

    Word scores added to the criterion, each off by default (nearest-neighbour search has no
    frequency prior, and continuous models over-produce rare neighbours of the right word):

    - ``word_bias`` (-word_bias): a learned bias b_w [vocab], trained by the contrastive losses
      (their logits become criterion + b_j) and added to every word's score;
    - :meth:`set_prior` (translate.py -decode_prior β): + β · log p_train(w);
    - :meth:`set_csls` (translate.py -csls K): CSLS (Conneau et al. 2018), 2·cos(ê, e_w) − r(w),
      with r(w) the mean cosine of e_w to its K nearest table words, in the criterion's units.

    ``train_table`` (-train_table): the table is a parameter (its own copy: a tied decoder keeps
    reading the pretrained vectors), trained through the contrastive losses' candidates and put
    back on the unit sphere after every update (:meth:`after_update`) and after loading.
    """

    continuous = True
    CRITERIA = ("vmf", "cosine", "l2")

    table: Tensor  # [vocab, m]: a buffer, or a Parameter with -train_table
    bias: nn.Parameter | None
    proj: nn.Linear | nn.Sequential
    make_index: Callable[[Tensor], SearchIndex] | None
    index: SearchIndex | None
    prior: Tensor | None
    hubness: Tensor | None
    beam_scale: float | None

    def __init__(
        self,
        hidden_size: int,
        table: Tensor,
        nonlinear: bool = False,
        criterion: str = "cosine",
        word_bias: bool = False,
        train_table: bool = False,
    ):
        super().__init__()
        if criterion not in self.CRITERIA:
            raise ValueError(f"criterion must be one of {self.CRITERIA}, got {criterion!r}")
        m = table.size(1)
        if nonlinear:
            self.proj = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, m))
        else:
            self.proj = nn.Linear(hidden_size, m)
        if train_table:  # [vocab, m], unit rows (padding row zero)
            self.table = nn.Parameter(table.clone())
            # a loaded table (an average of checkpoints: tools/average_models.py) goes back on the
            # sphere; rows that are on it stay bit for bit, so -train_from resumes exactly
            self.register_load_state_dict_post_hook(lambda module, _keys: module.unit_rows_(UNIT_TOLERANCE))
        else:
            self.register_buffer("table", table)
        self.bias = nn.Parameter(torch.zeros(table.size(0))) if word_bias else None
        self.criterion = criterion
        self.make_index, self.index, self.index_k = None, None, 0  # approximate search (decoding only): set_index
        self.prior = None  # [vocab]: β · log p_train(w) (decoding only): see set_prior
        self.hubness = None  # [vocab]: CSLS's r(w) (decoding only): see set_csls
        self.beam_scale = None  # beam search over a distribution of the words (decoding only): see set_beam_scale
        self._folded = None  # (table · W [vocab, d], table · b [vocab]) of the last layer (decoding only): step_scores
        self._folded_words = None  # the same with the vmf scores' word terms and the beam's scale folded in

    @property
    def trains_table(self) -> bool:
        return isinstance(self.table, nn.Parameter)

    def after_update(self) -> None:
        """Called after every optimiser step: a trained table's rows are put back to unit length
        (rows within float rounding of it, those no update moved, are left as they are)."""
        if self.trains_table:
            self.unit_rows_(ROUNDING)

    @torch.no_grad()
    def unit_rows_(self, tolerance: float = 0.0) -> None:
        """Scale to unit length every non-zero row whose length is more than ``tolerance`` from 1."""
        norm = self.table.norm(dim=-1, keepdim=True)
        off = ((norm - 1).abs() > tolerance) & (norm > 0)
        self.table.copy_(torch.where(off, self.table / norm.clamp_min(1e-12), self.table))

    def forward(self, dec_out: Tensor, gold: Tensor | None = None) -> Tensor | BiasedVector:
        """dec_out: [..., hidden] -> ê [..., m]; with -word_bias and ``gold`` (training, validation)
        a :class:`BiasedVector`, so that the loss sees the bias."""
        vec = self.proj(dec_out)
        return BiasedVector(vec, self.bias) if gold is not None and self.bias is not None else vec

    def scores(self, output: Tensor | BiasedVector, greedy: bool = False) -> Tensor:
        """output ê: [..., m] -> scores [..., vocab]; padding scores −inf.

        With an approximate index (:meth:`set_index`) only the index's ``index_k`` nearest words
        and the specials get their (exact) score; every other word scores −inf. ``greedy``: see
        :meth:`greedy_scores`."""
        out = prediction(output).float()
        if self.index is not None:
            distribution = not greedy and self.beam_scale is not None
            scores = self._index_scores(out, greedy or distribution)
            # beam search: log-probabilities of a distribution over the index's candidates
            return torch.log_softmax(scores / self.beam_scale, dim=-1) if distribution else scores
        return self._scores_from_dots(out, out @ self.table.t(), greedy)

    def _scores_from_dots(self, out, dots, greedy):
        """:meth:`scores` of the whole table from ê [..., m] and êᵀe(w) [..., vocab]."""
        distribution = not greedy and self.beam_scale is not None
        scores = self._criterion(out, dots, self.table.size(1), greedy=greedy or distribution)
        scores = self._word_scores(out, scores)
        # The zero padding row is no word, yet it would beat every word under cosine and vMF
        # when all êᵀe(w) < 0, and under l2 when all êᵀe(w) < 1/2.
        scores[..., PAD_ID] = float("-inf")
        # beam search: log-probabilities of a distribution over the words
        return torch.log_softmax(scores / self.beam_scale, dim=-1) if distribution else scores

    def step_scores(self, dec_out: Tensor, greedy: bool = False) -> Tensor:
        """The scores of one decoding step from the decoder's output ``dec_out`` [n, d]: :meth:`scores`
        (``greedy``: :meth:`greedy_scores`) of ê = proj(dec_out), computed with the table folded into
        the last layer where that is cheaper. That layer is ê = W x + b (x = dec_out for the linear
        generator); the criterion needs êᵀe(w) = xᵀ(Wᵀe(w)) + bᵀe(w), so with the table folded once,
        F = table · W [vocab, d] and c = table · b, each step is an [n, d] x [d, vocab] product instead
        of [n, m] x [m, vocab]: 0.4x the time at d 128, m 300 (lab/bench/folded_table.py). The scores agree
        to float rounding (as a change of BLAS kernel or thread count would give). Used in evaluation
        mode without an approximate index, and where d < m; the fold is built on first use and again
        after :meth:`set_table` or a move to another device."""
        # the last layer: a Linear (nn.Sequential's items are typed as Module)
        last = cast(nn.Linear, self.proj[-1]) if isinstance(self.proj, nn.Sequential) else self.proj
        if self.training or self.index is not None or last.in_features >= self.table.size(1):
            out = self(dec_out)
            return self.greedy_scores(out) if greedy else self.scores(out)
        x = self.proj[:-1](dec_out) if isinstance(self.proj, nn.Sequential) else dec_out
        distribution = not greedy and self.beam_scale is not None
        if self.criterion == "vmf" and self.hubness is None and (greedy or distribution):
            # the scores are êᵀe(w) + the word terms (over the beam's scale): one product, the word
            # terms and the scale folded in too, then (beam) the log-softmax
            weight, offset, _ = self._fold_words(last, self.beam_scale if distribution else None)
            scores = torch.addmm(offset, x.float(), weight.t())
            return torch.log_softmax(scores, dim=-1) if distribution else scores
        folded = self._fold(last)
        out = last(x).float()
        dots = torch.addmm(folded[1], x.float(), folded[0].t())
        return self._scores_from_dots(out, dots, greedy)

    @torch.no_grad()
    def _fold_words(self, last, scale):
        """The vmf scores' fold (Wᵀ-folded table [vocab, d], offsets [vocab]) with the word terms (bias,
        prior and offsets) added to the offsets, padding at −inf (its folded row zeroed), both divided
        by ``scale`` (None: 1); rebuilt whenever the fold, the bias, the prior (:meth:`set_prior`) or
        the scale changes."""
        folded = self._fold(last)
        bias = None if self.bias is None else (self.bias.data_ptr(), self.bias._version, self.bias.device)
        key = (folded[2], bias, scale)  # set_prior drops the fold
        if self._folded_words is None or self._folded_words[2] != key:
            term = self._word_term()
            weight, offset = folded[0].clone(), folded[1].clone()
            if term is not None:
                offset += term
            weight[PAD_ID], offset[PAD_ID] = 0.0, float("-inf")
            if scale is not None and scale != 1:
                weight, offset = weight / scale, offset / scale
            self._folded_words = (weight, offset, key)
        return self._folded_words

    @torch.no_grad()
    def _fold(self, last):
        # rebuilt when the table or the layer is another tensor, is changed in place or has moved
        key = tuple((t.data_ptr(), t._version, t.device) for t in (self.table, last.weight, last.bias) if t is not None)
        if self._folded is None or self._folded[2] != key:
            table, weight = self.table.detach().float(), last.weight.detach().float()
            bias = torch.zeros(weight.size(0), device=weight.device) if last.bias is None else last.bias.detach()
            self._folded = (table @ weight, table @ bias.float(), key)
        return self._folded

    def set_beam_scale(self, scale: float | None) -> None:
        """Beam search scores words by log softmax(score(w) / ``scale``) [vocab], a distribution over the
        words, instead of the criterion itself (None), whose sums over steps are no log-probabilities:
        the vMF log-density's scale moves with ‖ê‖, and short outputs win. The score is the greedy
        ranking with its word terms (bias, prior, offsets, CSLS): under vmf êᵀe(w) + b(w), so ``scale`` 1
        gives nllvmf_nce's contrastive distribution (NLLvMF's density renormalised over the table);
        under cosine (cos + b(w)), so infonce's temperature gives its training softmax; l2:
        −‖ê − e(w)‖². Greedy search is unchanged (the argmax is the same)."""
        if scale is not None and not scale > 0:
            raise ValueError(f"the beam's scale must be positive, got {scale}")
        self.beam_scale = scale

    def greedy_scores(self, output: Tensor | BiasedVector) -> Tensor:
        """What greedy search takes the argmax of: :meth:`scores` less, under ``vmf``, the term
        log C_m(‖ê‖), which is the same for every word of a row, so the argmax is unchanged. It is
        float64 special-function work at every step: on a GPU a string of small kernels that would
        make vMF greedy decoding markedly slower than cosine decoding."""
        return self.scores(output, greedy=True)

    def _word_scores(self, out, scores, ids=None):
        """scores [..., n] of the words ``ids`` [..., n] (None: the whole table) plus the learned bias,
        the decoding prior and the CSLS penalty, where set."""

        def of(vec):
            return vec if ids is None else vec[ids]

        if self.bias is not None:
            scores = scores + of(self.bias.detach().float())
        if self.prior is not None:
            scores = scores + of(self.prior)
        if self.hubness is not None:
            # CSLS ranks by 2·cos − r(w); in the criterion's units that is a penalty of r(w)/2 per
            # unit of cosine: κ/2 for vmf (κ·cos), 1/2 for cosine, ‖ê‖ for l2 (2‖ê‖·cos)
            norm = out.norm(dim=-1, keepdim=True)
            scale = {"vmf": norm / 2, "cosine": 0.5, "l2": norm}[self.criterion]
            scores = scores - scale * of(self.hubness)
        return scores

    def set_prior(self, log_prior: Tensor | None, beta: float, offsets: Tensor | None = None) -> None:
        """Decode with score + ``beta`` · log p_train(w) (+ ``offsets`` [vocab], translate.py
        -freq_offsets: each word's frequency-bin offset); ``log_prior`` [vocab] (None or β 0: no
        slope; no offsets either: off). A negative β rewards rare words; ``<unk>`` is not one (its
        count is the tokens no word covers, often none), so it takes the most frequent word's term
        there: no reward."""
        prior = None
        if log_prior is not None and beta != 0:
            prior = beta * log_prior.float().to(self.table.device)
            if beta < 0 and len(prior) > len(SPECIALS):
                prior[UNK_ID] = prior[len(SPECIALS) :].min()
        if offsets is not None:
            offsets = offsets.float().to(self.table.device)
            prior = offsets if prior is None else prior + offsets
        self.prior, self._folded_words = prior, None
        self._build_index()

    def set_csls(self, k: int) -> None:
        """Decode by CSLS with the mean cosine of each table word to its ``k`` nearest table words
        (0: off). The predictions' side of CSLS, r(ê), is the same for every word and drops out."""
        self.hubness = None if k == 0 else table_hubness(self.table, k)
        self._build_index()

    def _criterion(self, out, dots, m, row_sq=None, greedy=False):
        """The decode criterion from ê [..., m] and the dot products êᵀe(w) [..., n] (row_sq:
        ‖e(w)‖² of those rows, l2 only; default the whole table's). ``greedy``: vmf without its
        per-row constant log C_m(‖ê‖)."""
        if self.criterion == "vmf":
            return dots if greedy else log_cmk(out.norm(dim=-1, keepdim=True), m) + dots
        if self.criterion == "cosine":
            return dots / out.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        if row_sq is None:
            row_sq = (self.table * self.table).sum(-1)
        return -((out * out).sum(-1, keepdim=True) - 2 * dots + row_sq)

    def set_table(self, table: Tensor) -> None:
        """Decode over another unit-length table [vocab', m] (open vocabulary); drops the index."""
        if self.bias is not None or self.prior is not None or self.hubness is not None or self.trains_table:
            raise ValueError(
                "open-vocabulary decoding has no word bias, training count, CSLS score or trained row "
                "for the added words: it does not combine with -word_bias, -decode_prior, -csls or "
                "-train_table"
            )
        self.table = table
        self.make_index, self.index, self._folded, self._folded_words = None, None, None, None

    def set_index(self, make_index: Callable[[Tensor], SearchIndex] | None, k: int) -> None:
        """Approximate nearest-neighbour search (None: exact): ``make_index(rows [vocab, d])`` builds an
        index whose ``search(queries [n, d], k)`` returns the ids [n, k] of the rows 1.. with the
        largest inner products (-1 when fewer), e.g. ``lambda rows: FaissIndex(rows, "hnsw")``.

        The index searches the criterion itself, word terms included: its rows are the table's with
        the per-word terms (bias, decoding prior and offsets, and the CSLS penalty) as extra columns,
        and its queries ê with matching extra entries (:meth:`_search_rows`), so the best word by
        the full score is among the ``k`` it returns (exactly so for an exact index). It is built
        again whenever those terms change."""
        self.make_index, self.index_k = make_index, k
        self._build_index()

    def _build_index(self):
        self.index = None if self.make_index is None else self.make_index(self._search_rows())

    def _word_term(self):
        """The per-word term of the ranking [vocab] (bias + prior + offsets; under l2 −‖e(w)‖²), or None."""
        terms = [t for t in (None if self.bias is None else self.bias.detach().float(), self.prior) if t is not None]
        if self.criterion == "l2":
            terms.append(-(self.table.detach().float() ** 2).sum(-1))
        return sum(terms) if terms else None

    def _search_rows(self):
        """[vocab, m (+1) (+1)]: e(w), its word term, −r(w) (CSLS). With :meth:`_search_queries`'
        [a·ê, 1, c], the inner product is a·êᵀe(w) + term(w) − c·r(w): the criterion's ranking (vmf:
        a 1, c ‖ê‖/2; cosine: a 1/‖ê‖, c 1/2; l2: a 2, c ‖ê‖; see :meth:`_word_scores`)."""
        cols = [self.table.detach().float()]
        term = self._word_term()
        self._term_column = term is not None  # the queries' matching entry (built once, not per step)
        if term is not None:
            cols.append(term.unsqueeze(1))
        if self.hubness is not None:
            cols.append(-self.hubness.float().unsqueeze(1))
        return torch.cat(cols, 1)

    def _search_queries(self, flat):
        norm = flat.norm(dim=-1, keepdim=True)
        scale = {"vmf": 1.0, "cosine": 1.0 / norm.clamp_min(1e-12), "l2": 2.0}[self.criterion]
        parts = [flat * scale]
        if self._term_column:
            parts.append(torch.ones_like(norm))
        if self.hubness is not None:
            parts.append({"vmf": norm / 2, "cosine": torch.full_like(norm, 0.5), "l2": norm}[self.criterion])
        return torch.cat(parts, 1)

    def _index_scores(self, out, greedy=False):
        flat = out.reshape(-1, out.size(-1))
        ids = self.index.search(self._search_queries(flat), self.index_k).to(flat.device)  # [n, k]
        # The specials are always scored: </s> must be able to end a sentence.
        ids = torch.cat([torch.arange(1, len(SPECIALS), device=flat.device).expand(flat.size(0), -1), ids], 1)
        valid = ids > PAD_ID  # -1: fewer than k found; 0: padding
        ids = ids.clamp_min(0)
        rows = self.table[ids]  # [n, k', m]
        dots = torch.einsum("nm,nkm->nk", flat, rows)
        found = self._criterion(flat, dots, self.table.size(1), (rows * rows).sum(-1), greedy=greedy)
        found = self._word_scores(flat, found, ids)
        found = found.masked_fill(~valid, float("-inf"))
        scores = torch.full((flat.size(0), self.table.size(0)), float("-inf"), device=flat.device)
        scores.scatter_(1, ids, found)
        return scores.view(*out.shape[:-1], -1)


def table_hubness(table: Tensor, k: int, chunk: int | None = None) -> Tensor:
    """r(w): the mean cosine of every unit row of ``table`` [V, m] to its ``k`` nearest other rows
    (CSLS's neighbourhood density; padding 0): float32 [V]. Exact, ``chunk`` rows at a time
    (default: as many as negatives.search_chunk_rows allows, a memory budget)."""
    vocab = table.size(0)
    chunk = chunk or search_chunk_rows(vocab)
    k = min(k, vocab - 2)
    out = torch.zeros(vocab, device=table.device)
    words = table[1:].float()
    with torch.no_grad():
        for start in range(1, vocab, chunk):
            dots = table[start : start + chunk].float() @ words.t()  # [c, V-1]
            rows = torch.arange(dots.size(0), device=table.device)
            dots[rows, rows + start - 1] = float("-inf")  # not its own neighbour
            out[start : start + chunk] = dots.topk(k, dim=1).values.mean(1)
    return out


def normalize_table(table: Tensor) -> Tensor:
    """Unit-length rows; an all-zero row (padding) stays zero."""
    return F.normalize(table.float(), dim=-1, eps=1e-12)
