"""CTranslate2: a Transformer checkpoint exported as a CTranslate2 model (:func:`convert`, the
onmt_cont_convert command), and decoding through it (:class:`Ct2Translator`, translate.py -engine
ctranslate2, the API's and the server's ``engine``).

Every part of our Transformer has its CTranslate2 counterpart: pre-norm (or post-norm) layers, the
embeddings scaled by √d, our position vectors (written out as a table of POSITIONS rows per side),
self-attention's query and key/value projections fused into one, LayerNorm's epsilon, and a tied
decoder input (the frozen table through its projection, folded into one [vocab, d] table).

The output layer. A softmax model's is its projection. A continuous model scores each word w from
the predicted vector ê = W x + b: greedy search takes the argmax of êᵀe(w) + t(w), t the word
terms (the learned bias, -decode_prior's β · log p_train(w)); beam search takes log softmax of that
over τ (ContinuousGenerator.set_beam_scale: τ 1 for the vMF criterion). With the table folded into
the last layer (êᵀe(w) = xᵀ(Wᵀe(w)) + bᵀe(w)) that is a linear layer over x: weights table · W / τ,
bias (table · b + t) / τ, which CTranslate2's projection and log-softmax compute. So the export is
exact for the vMF criterion (nllvmf, nllvmf_nce: the presets) and for l2 (2êᵀe(w) − ‖e(w)‖² + t(w):
−‖ê‖² is the same for every word of a step, so neither the argmax nor the log-softmax sees it).
The cosine criterion divides by ‖ê‖ and CSLS subtracts ‖ê‖/2 · r(w) (vMF units): neither is linear
in x, and CTranslate2 has no layer for it, so those models are refused rather than approximated.
Padding and <s> (never produced by our search) get a bias of −1e9."""

import base64
import hashlib
import json
import math
import os
import shutil
import tempfile
from types import SimpleNamespace

import torch

from onmt_cont.constants import PAD_ID, UNK_ID
from onmt_cont.inputters.vocab import Vocab
from onmt_cont.models.transformer import TransformerDecoder, TransformerEncoder
from onmt_cont.text import check_text_record, checked_codes, checked_spm
from onmt_cont.translate.checks import check_decoding_options
from onmt_cont.translate.export_readme import SUBWORD_FILES, readme, subword_files
from onmt_cont.translate.search import BANNED
from onmt_cont.translate.translator import Translator, alignment, length_limits
from onmt_cont.translate.unk import replace_unk
from onmt_cont.utils.errors import UserError, printable

CONFIG_NAME = "onmt_cont.json"  # beside CTranslate2's model.bin: what translate.py needs besides the weights
CRITERIA = ("vmf", "l2")  # the continuous criteria an export decodes exactly (cosine is refused at conversion)
POSITIONS = 2048  # rows of each side's position table: no longer source is read, no longer output written
NEVER = -1e9  # the bias of words our search never produces (padding, <s>)
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16", "float32")


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise UserError("CTranslate2 is not installed: pip install ctranslate2") from None
    return ctranslate2


def _linear(spec, layer):
    spec.weight = layer.weight.detach().float().contiguous()
    if layer.bias is not None:
        spec.bias = layer.bias.detach().float().contiguous()


def _fused(spec, first, second):
    """One linear spec from two of our layers stacked (query and key/value: CTranslate2's fused qkv)."""
    spec.weight = torch.cat([first.weight, second.weight]).detach().float().contiguous()
    spec.bias = torch.cat([first.bias, second.bias]).detach().float().contiguous()


def _norm(spec, norm):
    spec.gamma = norm.weight.detach().float().contiguous()
    spec.beta = norm.bias.detach().float().contiguous()


def _self_attention(spec, attn, norm):
    _fused(spec.linear[0], attn.query, attn.key_value)
    _linear(spec.linear[1], attn.out)
    _norm(spec.layer_norm, norm)


def _ffn(spec, norm, ff):
    _norm(spec.layer_norm, norm)
    _linear(spec.linear_0, ff.w1)
    _linear(spec.linear_1, ff.w2)


def _norms(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]


def output_layer(gen):
    """(weight [vocab, d], bias [vocab]) of the linear layer whose logits CTranslate2 decodes with: see the
    module's docstring. UserError for an output layer that has no exact linear form."""
    if not getattr(gen, "continuous", False):
        if not hasattr(gen, "proj") or not isinstance(gen.proj, torch.nn.Linear):
            raise UserError("this model's output layer (-generator joint: tanh projections of the words and the "
                            "state) is no linear layer, which is all CTranslate2's output can be")
        weight = gen.proj.weight.detach().float().clone()
        bias = gen.proj.bias.detach().float().clone() if gen.proj.bias is not None else torch.zeros(len(weight))
        if gen.offsets is not None:
            bias += gen.offsets
    else:
        if gen.criterion == "cosine":
            raise UserError("this continuous model decodes by cosine (its loss's criterion), which divides each "
                            "score by ‖ê‖: not a linear layer, so CTranslate2 cannot compute it. The vMF and l2 "
                            "criteria (nllvmf, nllvmf_nce, l2) export exactly")
        if gen.hubness is not None:
            raise UserError("-csls subtracts ‖ê‖/2 · r(w), which is not linear in the decoder's state: it cannot be "
                            "exported to CTranslate2")
        if isinstance(gen.proj, torch.nn.Sequential):
            raise UserError("-generator_layers nonlinear (Linear-ReLU-Linear before the table) has no CTranslate2 "
                            "layer: only the linear generator exports")
        folded, offset, _ = gen._fold(gen.proj)
        scale = 1.0 if gen.criterion == "vmf" else 2.0  # l2: 2êᵀe(w) − ‖e(w)‖² (+ the word terms)
        weight, bias = scale * folded.clone(), scale * offset.clone()
        term = gen._word_term()
        if term is not None:
            bias += term
        if gen.beam_scale is not None and gen.beam_scale != 1:
            weight, bias = weight / gen.beam_scale, bias / gen.beam_scale
    weight[PAD_ID] = 0.0
    for word in BANNED:
        bias[word] = NEVER
    return weight.contiguous(), bias.contiguous()


def build_spec(translator):
    """The CTranslate2 TransformerSpec of a Translator's model (decoding options already applied to
    its generator: -decode_prior, -beam_temperature). UserError for what CTranslate2 cannot express."""
    _ctranslate2()  # a clear error when it is not installed
    from ctranslate2.specs import transformer_spec

    model = translator.model
    enc, dec = model.encoder, model.decoder
    if not isinstance(enc, TransformerEncoder) or not isinstance(dec, TransformerDecoder):
        raise UserError("CTranslate2 export is for Transformer models (-encoder_type and -decoder_type transformer); "
                        f"this one has a {type(enc).__name__} and a {type(dec).__name__}")
    epsilons = {m.eps for m in _norms(model)}
    if len(epsilons) != 1:
        raise UserError(f"the model's LayerNorms have several epsilons ({sorted(epsilons)}): CTranslate2 has one")
    if getattr(dec.embeddings, "known", None) is not None:
        raise UserError("an open-vocabulary model (-tgt_emb_extend) cannot be exported: convert the checkpoint")
    heads = enc.layers[0].attn.heads if enc.layers else dec.layers[0].self_attn.heads
    post = bool(enc.layers and enc.layers[0].post)
    align_layer = -1 if dec.alignment_layer is None else dec.alignment_layer
    spec = transformer_spec.TransformerSpec.from_config(
        (len(enc.layers), len(dec.layers)), heads, pre_norm=not post, alignment_layer=align_layer,
        alignment_heads=heads)
    spec.config.layer_norm_epsilon = float(epsilons.pop())
    with torch.no_grad():
        cpu = torch.device("cpu")
        for side, ours, embeddings in ((spec.encoder, enc, enc.embeddings.weight),
                                       (spec.decoder, dec, dec.embeddings.matrix())):
            (side.embeddings[0] if side is spec.encoder else side.embeddings).weight = \
                embeddings.detach().float().contiguous()
            side.position_encodings.encodings = ours.positions(POSITIONS, 0, cpu).detach().float().contiguous()
            if not post:
                _norm(side.layer_norm, ours.norm)
        for out, layer in zip(spec.encoder.layer, enc.layers, strict=True):
            _self_attention(out.self_attention, layer.attn, layer.norm_attn)
            _ffn(out.ffn, layer.norm_ff, layer.ff)
        for out, layer in zip(spec.decoder.layer, dec.layers, strict=True):
            _self_attention(out.self_attention, layer.self_attn, layer.norm_self)
            _linear(out.attention.linear[0], layer.ctx_attn.query)
            _linear(out.attention.linear[1], layer.ctx_attn.key_value)
            _linear(out.attention.linear[2], layer.ctx_attn.out)
            _norm(out.attention.layer_norm, layer.norm_ctx)
            _ffn(out.ffn, layer.norm_ff, layer.ff)
        spec.decoder.projection.weight, spec.decoder.projection.bias = output_layer(model.generator)
    spec.register_source_vocabulary(list(translator.src_vocab.itos))
    spec.register_target_vocabulary(list(translator.tgt_vocab.itos))
    return spec


def _jsonable(value):
    """A text record for JSON: bytes (a SentencePiece model) as {"base64": ...}."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _from_json(value):
    if isinstance(value, dict):
        if set(value) == {"base64"}:
            return base64.b64decode(value["base64"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def convert(model_path, output, quantization=None, decode_prior=0.0, decode_prior_cap=0, beam_temperature=1.0,
            alignment_layer=None, force=False):
    """Export the checkpoint ``model_path`` to the CTranslate2 model directory ``output`` (written beside
    it under a temporary name and renamed into place: a failed export leaves nothing; an existing
    ``output`` is replaced only with ``force``). The decoding options that shape the output layer are
    fixed here: ``decode_prior`` (and its cap) for a continuous model, ``beam_temperature``, and the
    ``alignment_layer`` whose attention -replace_unk reads. Returns the record written beside the model."""
    ct2 = _ctranslate2()
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise UserError(f"-quantization {quantization}: expected one of {', '.join(QUANTIZATIONS)}")
    if os.path.lexists(output) and not force:
        raise UserError(f"-output {output}: exists; give -force to replace it")
    if os.path.lexists(output):
        _check_replaceable(output, model_path)
    translator = Translator(model_path, "cpu", decode_prior=decode_prior, decode_prior_cap=decode_prior_cap,
                            beam_temperature=beam_temperature, alignment_layer=alignment_layer)
    for side in ("src", "tgt"):  # a damaged raw-text record is not copied into the export (issue 77.18)
        checked_spm(translator.text_record, side, model_path)
    checked_codes(translator.text_record, model_path)
    spec = build_spec(translator)
    gen = translator.model.generator
    record = {
        "format": 1, "onmt_cont_checkpoint": os.path.basename(model_path),
        "continuous": bool(getattr(gen, "continuous", False)),
        "criterion": getattr(gen, "criterion", None), "quantization": quantization or "float32",
        "decode_prior": decode_prior, "decode_prior_cap": decode_prior_cap, "beam_temperature": beam_temperature,
        "alignment_layer": alignment_layer, "decoder_layers": len(translator.model.decoder.layers),
        "positions": POSITIONS, "lower": translator.lower,
        "src_vocab": translator.src_vocab.to_dict(), "tgt_vocab": translator.tgt_vocab.to_dict(),
        "text": _jsonable(translator.text_record),
    }
    parent = os.path.dirname(os.path.abspath(output))
    try:
        os.makedirs(parent, exist_ok=True)  # as preprocess.py -save_data creates its folder
    except OSError as exc:
        raise UserError(f"-output {output}: cannot create its folder {parent} ({exc.strerror or exc})") from None
    try:
        tmp = tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", suffix="-" + os.path.basename(output)[:100], dir=parent)
    except OSError as exc:
        raise UserError(f"-output {output}: cannot write in {parent} ({exc.strerror or exc})") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would keep a server's account out
        spec.validate()
        spec.optimize(quantization=quantization)
        spec.save(tmp)
        for name, data in subword_files(translator.text_record).items():  # CTranslate2's conventions beside model.bin
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
            f.write(readme({**record, "text": translator.text_record}, POSITIONS))
        record["files"] = {name: _sha256(os.path.join(tmp, name)) for name in sorted(os.listdir(tmp))}
        with open(os.path.join(tmp, CONFIG_NAME), "w", encoding="utf-8") as f:
            json.dump(record, f)
        ct2.Translator(tmp, device="cpu")  # it loads, or nothing is put in place
        _put_in_place(tmp, output, model_path, force)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise UserError(f"-output {output}: {exc.strerror or exc}") from None
        raise
    return record


# What an export folder holds: CTranslate2's files and ours. -force replaces a folder of these files only.
EXPORT_FILES = frozenset({"model.bin", "config.json", "shared_vocabulary.json", "source_vocabulary.json",
                          "target_vocabulary.json", "vmap.txt", CONFIG_NAME, "README.md", *SUBWORD_FILES.values()})


def _check_replaceable(output, model_path):
    """-force replaces ``output`` only if it is an earlier export: a real folder of EXPORT_FILES (with model.bin and
    onmt_cont.json), holding neither the current folder nor -model. Raises UserError saying nothing was deleted."""
    why = None
    real = os.path.realpath(output)
    if os.path.islink(output) or not os.path.isdir(output):
        why = "is a symbolic link" if os.path.islink(output) else "is no folder"
    else:
        names = set(os.listdir(output))
        strangers = sorted(names - EXPORT_FILES)
        if not {"model.bin", CONFIG_NAME} <= names:
            why = f"holds no export of onmt_cont_convert (no model.bin and {CONFIG_NAME})"
        elif strangers:
            why = f"holds files an export does not ({', '.join(strangers[:3])}{', ...' if len(strangers) > 3 else ''})"
        elif any(not os.path.isfile(os.path.join(output, n)) or os.path.islink(os.path.join(output, n))
                 for n in names):
            why = "holds something other than plain files"
        else:
            for what, path in (("the current folder", os.getcwd()), ("-model", model_path)):
                inside = os.path.realpath(path)
                if inside == real or inside.startswith(real.rstrip(os.sep) + os.sep):
                    why = f"holds {what}"
    if why:
        raise UserError(f"-output {output}: -force replaces only an earlier export of onmt_cont_convert, and this "
                        f"{why}; nothing was deleted")


def _put_in_place(tmp, output, model_path, force):
    """Rename the finished export ``tmp`` to ``output``. An earlier export is moved aside first, checked again
    and deleted only once the new one is in place; a folder that appeared meanwhile (another conversion, a user)
    is never replaced: os.mkdir claims the name, so two conversions to one name cannot both succeed."""
    aside = None
    if os.path.lexists(output):
        if not force:
            raise UserError(f"-output {output}: appeared during the conversion; give -force to replace it")
        aside = f"{tmp}.old"
        os.rename(output, aside)
        try:
            _check_replaceable(aside, model_path)
        except UserError:
            os.rename(aside, output)
            raise
    try:
        os.mkdir(output)
    except FileExistsError:
        kept = f"; the earlier export is kept as {aside}" if aside is not None else ""
        raise UserError(f"-output {output}: appeared during the conversion; nothing was replaced{kept}") from None
    os.replace(tmp, output)  # onto the empty folder claimed above
    if aside is not None:
        shutil.rmtree(aside)


def is_export(path):
    """Whether ``path`` is a directory :func:`convert` wrote."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, CONFIG_NAME))


def read_record(path):
    """An export's onmt_cont.json, checked -> (record, source Vocab, target Vocab). Every value has the type
    convert() wrote, and every file it lists still has the sha256 recorded then: an export edited or damaged
    afterwards is a UserError naming the file, not CTranslate2's traceback or silently other output."""
    def bad(what):
        raise UserError(f"-model {path}: not a model onmt_cont_convert wrote ({CONFIG_NAME}: {what})")

    try:
        with open(os.path.join(path, CONFIG_NAME), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        bad(printable(exc))
    if not isinstance(record, dict):
        bad(f"expected a mapping, got {type(record).__name__}")
    try:
        src, tgt = Vocab.from_dict(record["src_vocab"]), Vocab.from_dict(record["tgt_vocab"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        bad(f"its vocabularies: {printable(exc)}")
    if record.get("format") != 1:
        bad(f"format {record.get('format')!r}: this onmt_cont reads format 1")
    types = {"continuous": bool, "lower": bool, "positions": int, "decode_prior": (int, float),
             "decode_prior_cap": int, "beam_temperature": (int, float), "quantization": str}
    for key, kind in types.items():
        value = record.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            bad(f"{key} is {value!r}")
    if record["positions"] < 1 or not all(math.isfinite(record[k]) for k in ("decode_prior", "beam_temperature")):
        bad("positions must be at least 1, decode_prior and beam_temperature finite")
    layers = record.get("decoder_layers", 1)
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        bad(f"decoder_layers is {layers!r}")
    align = record.get("alignment_layer")
    if not (align is None or align == "mean" or (isinstance(align, int) and not isinstance(align, bool))):
        bad(f"alignment_layer is {align!r}")
    if record["continuous"] and record.get("criterion") not in CRITERIA:
        bad(f"criterion {record.get('criterion')!r}: expected one of {', '.join(CRITERIA)}")
    check_text_record(_from_json(record.get("text")), f"-model {path}")
    files = record.get("files", {})  # exports before the checksums have none
    if not isinstance(files, dict):
        bad("files is not a mapping")
    for name, digest in files.items():
        if os.path.basename(name) != name or not isinstance(digest, str):
            bad(f"files lists {name!r}")
        try:
            actual = _sha256(os.path.join(path, name))
        except OSError as exc:
            raise UserError(f"-model {path}: {name}: cannot read it ({(exc.strerror or str(exc)).lower()}): convert "
                            "the checkpoint again") from None
        if actual != digest:
            raise UserError(f"-model {path}: {name} was changed or damaged after onmt_cont_convert wrote it (its "
                            "sha256 is not the one recorded): convert the checkpoint again")
    for side, vocab in (("source", src), ("target", tgt)):  # onmt_cont.json's vocabularies are CTranslate2's
        name = f"{side}_vocabulary.json"
        if name in files:
            try:
                with open(os.path.join(path, name), encoding="utf-8") as f:
                    same = json.load(f) == vocab.itos
            except (OSError, ValueError):
                same = False
            if not same:
                bad(f"its {side} vocabulary is not {name}'s: one of them was edited after the conversion")
    return record, src, tgt


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Ct2Translator(Translator):
    """:class:`Translator`'s interface over a :func:`convert` directory, decoding with CTranslate2:
    greedy and beam search (OpenNMT-py's length normalisation, -length_penalty avg or none), -n_best,
    -with_score, -block_ngram_repeat, -ban_unk_token, random sampling, -tgt_prefix (also under beam
    search), -replace_unk, -report_align and -attn_debug (the attention of the exported alignment layer,
    every head averaged). ``threads``: CTranslate2's intra-op threads."""

    def __init__(self, path, device="cpu", beam_size=1, max_length=None, max_length_ratio=2.0,
                 length_penalty="avg", alpha=0.0, replace_unk=False, lexicon=None, ban_unk=False,
                 block_ngram_repeat=0, threads=1):
        # translate.py's checks, for the API's keywords too: one set for both engines (issue 77.12)
        check_decoding_options(beam_size, max_length, max_length_ratio, alpha, block_ngram_repeat=block_ngram_repeat,
                               length_penalty=length_penalty)
        ct2 = _ctranslate2()
        record, src_vocab, tgt_vocab = read_record(path)
        if length_penalty == "wu":
            raise UserError("-length_penalty wu: CTranslate2 normalises by length ** -alpha (-length_penalty avg "
                            "with alpha 1 is ours), not by Wu et al.'s ((5 + length) / 6) ** alpha")
        if beam_size < 1 or beam_size > len(tgt_vocab):
            raise UserError(f"-beam_size {beam_size}: must be from 1 to the target vocabulary's {len(tgt_vocab)}")
        self.record = record
        self.text_record = check_text_record(_from_json(record.get("text")), f"-model {path}")
        try:
            self.ct2 = ct2.Translator(path, device="cuda" if str(device).startswith("cuda") else "cpu",
                                      inter_threads=1, intra_threads=max(int(threads or 1), 1))
        except (RuntimeError, ValueError) as exc:  # a damaged model.bin of an export without checksums
            raise UserError(f"-model {path}: CTranslate2 cannot load it ({printable(str(exc).splitlines()[0])[:200]}): "
                            "convert the checkpoint again") from None
        self.model = None
        self.src_vocab, self.tgt_vocab, self.train_vocab = src_vocab, tgt_vocab, tgt_vocab
        self.n_train_words = len(tgt_vocab)
        self.lower = bool(record.get("lower"))
        self.beam_size, self.max_length, self.max_length_ratio = beam_size, max_length, max_length_ratio
        self.length_penalty, self.alpha = length_penalty, alpha
        self.replace_unk, self.lexicon, self.ban_unk = replace_unk, lexicon, ban_unk
        self.block_ngram_repeat = block_ngram_repeat
        self.n_best, self._with_score, self.last_nbest, self.min_length = 1, False, None, 0
        self.sampler, self.report_align, self.last_align, self.attn_debug = None, False, None, False
        self.words_out = self.unk_out = 0

    def output_limit(self, source_length):
        return min(super().output_limit(source_length), self.record.get("positions", POSITIONS) - 1)

    def _limit_note(self):
        return f"; the export's positions, {self.record.get('positions', POSITIONS)}, less one"

    def set_ensemble(self, others, names):
        if others:
            raise UserError("-engine ctranslate2 decodes one exported model; an ensemble needs -engine torch")

    def set_sampling(self, topk=0, topp=0.0, temp=1.0, seed=0):
        super().set_sampling(topk, topp, temp, seed)
        if self.sampler is not None:
            _ctranslate2().set_random_seed(self.sampler.seed)  # -1 drawn by the base class

    def translate_batch(self, token_lists, attention=None, prefixes=None):
        if attention is None:
            attention = self.replace_unk or self.report_align or self.attn_debug
        longest, positions = max(len(t) for t in token_lists), self.record.get("positions", POSITIONS)
        if longest > positions:
            raise UserError(f"a source sentence of {longest} tokens: the exported model has position vectors for "
                            f"{positions}")
        limits = length_limits(torch.tensor([len(t) for t in token_lists]), self.max_length,
                               self.max_length_ratio).clamp(max=positions - 1).tolist()
        steps = max(limits)
        unk = self.src_vocab.itos[UNK_ID]
        source = [[unk if self.src_vocab.index(t) == UNK_ID else t for t in toks] for toks in token_lists]
        options = {
            # every finished hypothesis: CTranslate2 divides its total by the length with </s>, ours (-length_penalty
            # avg) without it, so they are ranked again below. (Its length penalty 0 would give the totals, but
            # end the search as soon as the best hypothesis ends: a narrower search than ours.)
            "beam_size": self.beam_size, "num_hypotheses": self.beam_size, "max_decoding_length": steps,
            "min_decoding_length": max(1, self.min_length), "length_penalty": 1.0,
            "disable_unk": self.ban_unk, "no_repeat_ngram_size": self.block_ngram_repeat,
            "return_scores": True, "return_attention": bool(attention), "max_input_length": 0,
            "return_end_token": False,
        }
        if self.sampler is not None:
            topk = self.sampler.topk
            options.update(sampling_topk=0 if topk == -1 else topk, sampling_topp=self.sampler.topp or 1.0,
                           sampling_temperature=self.sampler.temp)
        if prefixes is not None:
            options["target_prefix"] = [list(p) for p in prefixes]
        if steps == 0:  # -max_length 0: empty lines, as the checkpoint gives (CTranslate2 refuses a length of 0)
            results = [SimpleNamespace(hypotheses=[[]], scores=[0.0], attention=None) for _ in source]
        else:
            results = self.ct2.translate_batch(source, **options)
        outputs, attns, self.last_raw, nbest = [], [], [], []
        for toks, result, limit in zip(token_lists, results, limits, strict=True):
            hyps = []
            for h, words in enumerate(result.hypotheses):
                words = list(words)[:limit]
                attn = None
                if attention and result.attention:
                    attn = torch.tensor(result.attention[h][: len(words)], dtype=torch.float32).reshape(
                        len(words), len(toks))
                ended = len(result.hypotheses[h]) < steps  # with </s> (its length counts it), or cut there
                total = result.scores[h] * (len(result.hypotheses[h]) + ended)
                score = total / (max(len(words), 1) if self.length_penalty == "avg" else 1.0)
                hyps.append((words, attn, score))
            hyps.sort(key=lambda hyp: hyp[2], reverse=True)  # stable: ties keep CTranslate2's order
            hyps = hyps[: self.n_best]
            words, attn, _ = hyps[0]
            ids = self.tgt_vocab.encode(words)
            self.words_out += len(ids)
            self.unk_out += ids.count(UNK_ID)
            self.last_raw.append(words)
            outputs.append(self._replaced(words, attn, toks))
            attns.append(attn)
            nbest.append([(self._replaced(w, a, toks), s) for w, a, s in hyps])
        self.last_align = [alignment(a, len(t)) for t, a in zip(token_lists, attns, strict=True)] \
            if self.report_align else None
        self.last_nbest = nbest if self.scored else None
        return outputs, attns

    def _replaced(self, words, attn, src_tokens):
        return replace_unk(words, attn, src_tokens, self.lexicon) if self.replace_unk and attn is not None \
            else words


# translate.py's options that -engine ctranslate2 cannot honour, with their defaults (given otherwise: refused)
FIXED_AT_EXPORT = {"decode_prior": 0.0, "decode_prior_cap": 0, "beam_temperature": 1.0, "alignment_layer": None}
TORCH_ONLY = {"csls": 0, "freq_offsets": None, "tgt_emb_extend": None, "ann": None}


def resolve_engine(engine, model):
    """translate.py -engine: as given, or (None) read from ``model``: a directory :func:`convert` wrote is
    decoded by CTranslate2, anything else by torch. UserError for a model of the other engine."""
    export = is_export(model)
    if engine is None:
        return "ctranslate2" if export else "torch"
    if engine == "torch" and export:
        raise UserError(f"-model {model} is a CTranslate2 model (onmt_cont_convert wrote it): decode it with "
                        "-engine ctranslate2, or give the checkpoint it was converted from")
    if engine == "ctranslate2" and not export:
        raise UserError(f"-engine ctranslate2 decodes a directory onmt_cont_convert wrote; -model {model} is not one: "
                        f"convert it first (onmt_cont_convert -model {model} -output DIR)")
    return engine


def check_engine_options(given, record=None):
    """``given``: translate.py's options by name. UserError for one that -engine ctranslate2 cannot apply:
    those fixed at export (``record``: the export's onmt_cont.json, which says what was fixed) and those
    only the torch engine has."""
    for name, default in FIXED_AT_EXPORT.items():
        value = given.get(name, default)
        fixed = (record or {}).get(name, default)
        if name == "alignment_layer" and value is not None and (record or {}).get("decoder_layers"):
            # a layer number is the same layer as the exported one counted from either end ("0" of one layer = -1)
            layers = record["decoder_layers"]
            exported = -1 if fixed is None else fixed
            if value == "mean" or exported == "mean":
                same = value == exported
            else:
                same = isinstance(value, int) and -layers <= value < layers and value % layers == exported % layers
            if same:
                continue
            shown = "the last decoder layer" if fixed is None else f"decoder layer {fixed}"
            raise UserError(f"-alignment_layer {value}: this export's attention is {shown} (of {layers}), fixed when "
                            f"it was converted; convert again with onmt_cont_convert -alignment_layer {value}")
        if value != default and value != fixed:
            raise UserError(f"-{name} {value}: a CTranslate2 model's output layer was fixed when it was converted "
                            f"(-{name} {fixed}); convert again with onmt_cont_convert -{name} {value}")
    for name, default in TORCH_ONLY.items():
        if given.get(name, default) not in (default, None, 0, False):
            raise UserError(f"-{name} needs the checkpoint itself (-engine torch): CTranslate2 decodes the exported "
                            "output layer as it is")
