"""Could the continuous preset's shared block (losses/shared_block.py) take its logits product in bfloat16? On one
CPU thread: the product's time in float32 (what the block does) against bfloat16, and each variant's error against
float64 in what the loss uses, lse_i = log Σ_j exp(ê_i · e_j) and the gradient's u_i = Σ_j p_ij e_j, on the
preset's sizes (rows of 256 predictions, about 3,150 shared candidates, 300-d unit vectors of a real table) and
the predictions' scale (‖ê‖ = -norm, cosine -cos to the gold word's vector, which is not a candidate).

bfloat16 rounds the product's output to 2^-9 of its magnitude, up to ‖ê‖; the "shifted" variants append a
column so that the product gives ê · e_j − c_i for a per-row reference c_i (c cancels in p and is added back to
lse): the gold word's logit, or the bound ‖ê‖. Without a -table, unit vectors drawn at random.

    python lab/bench/shared_block_bf16.py -table runs/tiny_en-de/srcbpe/emb.dec.pt
"""

import argparse

import torch

from lab.bench.benchlib import alternating_ms
from onmt_cont.utils.loading import load_checkpoint_data


def lse_and_u(z, table):
    """z [r, S] float32 or float64 logits -> (lse [r], u [r, m]) in float64."""
    z = z.double()
    lse = torch.logsumexp(z, 1)
    return lse, torch.softmax(z, 1) @ table.double()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-table", help="embeddings_to_torch.py's table ([V, m], unit rows)")
    p.add_argument("-rows", type=int, default=256)
    p.add_argument("-candidates", type=int, default=3150)
    p.add_argument("-norm", type=float, default=60.0)
    p.add_argument("-cos", type=float, default=0.8)
    p.add_argument("-reps", type=int, default=20)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    if args.table:
        table = load_checkpoint_data(args.table, "a table of embeddings_to_torch.py").float()
        table = table[table.norm(dim=1) > 0]
    else:
        table = torch.nn.functional.normalize(torch.randn(20000, 300, generator=gen), dim=1)
    pick = torch.randperm(table.size(0), generator=gen)
    words = table[pick[: args.candidates]]
    gold = table[pick[args.candidates : args.candidates + args.rows]]
    noise = torch.randn(args.rows, table.size(1), generator=gen)
    noise = torch.nn.functional.normalize(noise - (noise * gold).sum(1, keepdim=True) * gold, dim=1)
    vec = args.norm * (args.cos * gold + (1 - args.cos**2) ** 0.5 * noise)

    ref_lse, ref_u = lse_and_u(vec.double() @ words.double().t(), words)
    w16 = words.bfloat16()
    ones = torch.ones(words.size(0), 1)
    w16_col = torch.cat([words, ones], 1).bfloat16()

    def shifted(c):
        z = torch.mm(torch.cat([vec, -c[:, None]], 1).bfloat16(), w16_col.t()).float()
        return z + c[:, None]  # c back in float32: lse and p as the block would take them

    variants = {
        "float32 (now)": lambda: torch.mm(vec, words.t()),
        "bfloat16": lambda: torch.mm(vec.bfloat16(), w16.t()).float(),
        "bfloat16 shifted by the gold logit": lambda: shifted((vec * gold).sum(1)),
        "bfloat16 shifted by ‖ê‖": lambda: shifted(vec.norm(dim=1)),
    }
    ms = alternating_ms(variants, args.reps, lambda f: f())
    print(
        f"{args.rows} rows x {args.candidates} candidates x {table.size(1)}-d, ‖ê‖ {args.norm}, cos to gold "
        f"{args.cos}; one thread, median of {args.reps}"
    )
    print("| variant | ms | x float32 | lse: max abs error | mean abs error | u: max relative error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, fn in variants.items():
        lse, u = lse_and_u(fn(), words)
        err = (lse - ref_lse).abs()
        rel = ((u - ref_u).norm(dim=1) / ref_u.norm(dim=1)).max()
        print(
            f"| {name} | {ms[name]:.2f} | {ms['float32 (now)'] / ms[name]:.2f} | {err.max():.2e} | "
            f"{err.mean():.2e} | {rel:.2e} |"
        )


if __name__ == "__main__":
    main()
