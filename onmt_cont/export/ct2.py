"""onmt_cont_convert: a Transformer checkpoint exported as a CTranslate2 model folder (:func:`convert`).

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
Padding and <s> (never produced by our search) get a bias of −1e9.

The folder it writes is read back by onmt_cont.translate.ct2 (the engine), which checks every file against
the sha256 recorded here."""

import base64
import json
import os
import shutil
import tempfile

import torch

from onmt_cont.constants import PAD_ID
from onmt_cont.export.readme import SUBWORD_FILES, readme, subword_files
from onmt_cont.models.transformer import TransformerDecoder, TransformerEncoder
from onmt_cont.text.record import checked_codes, checked_spm
from onmt_cont.translate.config import DecodingConfig
from onmt_cont.translate.ct2 import CONFIG_NAME, POSITIONS, _ctranslate2, _sha256
from onmt_cont.translate.search import BANNED
from onmt_cont.translate.translator import Translator
from onmt_cont.utils.errors import UserError

NEVER = -1e9  # the bias of words our search never produces (padding, <s>)
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16", "float32")


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
            raise UserError(
                "this model's output layer (-generator joint: tanh projections of the words and the "
                "state) is no linear layer, which is all CTranslate2's output can be"
            )
        weight = gen.proj.weight.detach().float().clone()
        bias = gen.proj.bias.detach().float().clone() if gen.proj.bias is not None else torch.zeros(len(weight))
        if gen.offsets is not None:
            bias += gen.offsets
    else:
        if gen.criterion == "cosine":
            raise UserError(
                "this continuous model decodes by cosine (its loss's criterion), which divides each "
                "score by ‖ê‖: not a linear layer, so CTranslate2 cannot compute it. The vMF and l2 "
                "criteria (nllvmf, nllvmf_nce, l2) export exactly"
            )
        if gen.hubness is not None:
            raise UserError(
                "-csls subtracts ‖ê‖/2 · r(w), which is not linear in the decoder's state: it cannot be "
                "exported to CTranslate2"
            )
        if isinstance(gen.proj, torch.nn.Sequential):
            raise UserError(
                "-generator_layers nonlinear (Linear-ReLU-Linear before the table) has no CTranslate2 "
                "layer: only the linear generator exports"
            )
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
        raise UserError(
            "CTranslate2 export is for Transformer models (-encoder_type and -decoder_type transformer); "
            f"this one has a {type(enc).__name__} and a {type(dec).__name__}"
        )
    epsilons = {m.eps for m in _norms(model)}
    if len(epsilons) != 1:
        raise UserError(f"the model's LayerNorms have several epsilons ({sorted(epsilons)}): CTranslate2 has one")
    if getattr(dec.embeddings, "known", None) is not None:
        raise UserError("an open-vocabulary model (-tgt_emb_extend) cannot be exported: convert the checkpoint")
    heads = enc.layers[0].attn.heads if enc.layers else dec.layers[0].self_attn.heads
    post = bool(enc.layers and enc.layers[0].post)
    align_layer = -1 if dec.alignment_layer is None else dec.alignment_layer
    spec = transformer_spec.TransformerSpec.from_config(
        (len(enc.layers), len(dec.layers)), heads, pre_norm=not post, alignment_layer=align_layer, alignment_heads=heads
    )
    spec.config.layer_norm_epsilon = float(epsilons.pop())
    with torch.no_grad():
        cpu = torch.device("cpu")
        for side, ours, embeddings in (
            (spec.encoder, enc, enc.embeddings.weight),
            (spec.decoder, dec, dec.embeddings.matrix()),
        ):
            (side.embeddings[0] if side is spec.encoder else side.embeddings).weight = (
                embeddings.detach().float().contiguous()
            )
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


def convert(
    model_path,
    output,
    quantization=None,
    decode_prior=0.0,
    decode_prior_cap=0,
    beam_temperature=1.0,
    alignment_layer=None,
    force=False,
):
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
    config = DecodingConfig(
        beam_size=1,
        block_ngram_repeat=0,
        decode_prior=decode_prior,
        decode_prior_cap=decode_prior_cap,
        beam_temperature=beam_temperature,
        alignment_layer=alignment_layer,
    )
    translator = Translator.from_checkpoint(model_path, config)
    for side in ("src", "tgt"):  # a damaged raw-text record is not copied into the export (issue 77.18)
        checked_spm(translator.text_record, side, model_path)
    checked_codes(translator.text_record, model_path)
    spec = build_spec(translator)
    gen = translator.model.generator
    record = {
        "format": 1,
        "onmt_cont_checkpoint": os.path.basename(model_path),
        "continuous": bool(getattr(gen, "continuous", False)),
        "criterion": getattr(gen, "criterion", None),
        "quantization": quantization or "float32",
        "decode_prior": decode_prior,
        "decode_prior_cap": decode_prior_cap,
        "beam_temperature": beam_temperature,
        "alignment_layer": alignment_layer,
        "decoder_layers": len(translator.model.decoder.layers),
        "positions": POSITIONS,
        "lower": translator.lower,
        "src_vocab": translator.src_vocab.to_dict(),
        "tgt_vocab": translator.tgt_vocab.to_dict(),
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
EXPORT_FILES = frozenset(
    {
        "model.bin",
        "config.json",
        "shared_vocabulary.json",
        "source_vocabulary.json",
        "target_vocabulary.json",
        "vmap.txt",
        CONFIG_NAME,
        "README.md",
        *SUBWORD_FILES.values(),
    }
)


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
        elif any(not os.path.isfile(os.path.join(output, n)) or os.path.islink(os.path.join(output, n)) for n in names):
            why = "holds something other than plain files"
        else:
            for what, path in (("the current folder", os.getcwd()), ("-model", model_path)):
                inside = os.path.realpath(path)
                if inside == real or inside.startswith(real.rstrip(os.sep) + os.sep):
                    why = f"holds {what}"
    if why:
        raise UserError(
            f"-output {output}: -force replaces only an earlier export of onmt_cont_convert, and this "
            f"{why}; nothing was deleted"
        )


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
