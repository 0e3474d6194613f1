"""lab/recipes/word_choice.sh's JOBS: each row and seed trained once, with a stub python (a bash script that only
writes the files the recipe checks), even when the recipe file is edited while its main loop waits on its jobs."""

import os
import re
import shutil
import stat
import subprocess

import pytest

from tests.helpers import ROOT

RECIPES = ROOT / "lab" / "recipes"

# train.py: the continuous row inserts a 304-byte line near the top of the recipe, in place (same inode, as an editor or
# a commit of the same checkout does), and ends; the ce row ends 3 s later, so the main loop is still waiting
STUB = r"""#!/usr/bin/env bash
script=$1; shift
get() { local k=$1; shift; while [ $# -gt 0 ]; do [ "$1" = "$k" ] && { echo "$2"; return; }; shift; done; }
case $script in
  train.py)
    m=$(get -save_model "$@")
    case $m in
      *_ce_*) sleep 3 ;;
      *) if [ -n "${STUB_EDIT:-}" ] && mkdir "$STUB_EDIT.done" 2> /dev/null; then
           text=$(cat "$STUB_EDIT")
           { head -n 3 <<< "$text"; printf '# %0301d\n' 0; tail -n +4 <<< "$text"; } > "$STUB_EDIT"
         fi ;;
    esac
    for f in last best epoch_1 epoch_2; do echo x > "${m}_$f.pt"; done ;;
  tools/average_models.py) echo x > "$(get -output "$@")" ;;
  translate.py)
    echo hyp > "$(get -output "$@")"
    echo "sacreBLEU (detokenized): 30.00  nrefs:1"
    echo "without -replace_unk (the model's own words, 1.0% <unk>): sacreBLEU 29.00, tokenized BLEU 30.00" ;;
  lab/tools/rare_word_f1.py) echo '{}' > "$(get -json "$@")" ;;
  *) echo "stub python: unexpected $script" >&2; exit 3 ;;
esac
"""


def run_recipe(tmp_path, seeds, recipe=RECIPES / "word_choice.sh"):
    repo = tmp_path / "repo"
    (repo / "lab" / "recipes").mkdir(parents=True)
    shutil.copy(recipe, repo / "lab" / "recipes" / "word_choice.sh")
    shutil.copy(RECIPES / "prepare_m30k.sh", repo / "lab" / "recipes")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(STUB)
    (bin_dir / "python").chmod(stat.S_IRWXU)
    out = tmp_path / "out"
    (out / "tok").mkdir(parents=True)
    for split in ("train", "val", "test_2016_flickr", "test_2017_flickr"):  # step 1's outputs: skipped
        for lang in ("en", "de"):
            (out / "tok" / f"{split}.{lang}").write_text("x\n")
    for name in ("data.vocab.pt", "emb.dec.pt", "lexicon.txt"):
        (out / name).write_text("x\n")
    script = repo / "lab" / "recipes" / "word_choice.sh"
    env = {
        **os.environ,
        "PYTHON": str(bin_dir / "python"),
        "OUT": str(out),
        "SRC": "en",
        "TGT": "de",
        "CONFIGS": "t_ce_d01_avg t_nce_both_avg_d00_lr1",
        "SEEDS": seeds,
        "JOBS": "2",
        "STUB_EDIT": str(script),
    }
    res = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert (tmp_path / "repo" / "lab" / "recipes" / "word_choice.sh.done").is_dir()  # the edit happened
    return res


@pytest.mark.parametrize("seeds", ["2", "1 2"])
def test_jobs_train_each_run_once_when_the_recipe_is_edited(tmp_path, seeds):
    res = run_recipe(tmp_path, seeds)
    assert res.returncode == 0, res.stdout + res.stderr
    trains = re.findall(r"\] (train \S+ seed \d+)$", res.stdout, re.M)
    assert sorted(trains) == sorted(
        f"train {row} seed {s}" for row in ("t_ce_d01_avg", "t_nce_both_avg_d00_lr1") for s in seeds.split()
    ), res.stdout
    assert res.stdout.rstrip().endswith("done"), res.stdout


SOURCED = {"prepare_m30k.sh"}  # read with "." by other recipes: an exit there would end its caller


@pytest.mark.parametrize(
    "script",
    sorted(f"lab/recipes/{p.name}" for p in RECIPES.glob("*.sh") if p.name not in SOURCED)
    + ["docs/recipes/own_data.sh", "docs/quickstart.sh", "docs/gpu_check.sh"],
)
def test_every_script_is_parsed_whole_before_it_runs(script):
    """Bash reads a script as it runs it, so a script that waits on long jobs (training, decoding) and is edited
    meanwhile goes on at its old byte offset in the new text. Each script is one { ... } block ending in exit."""
    lines = [line for line in (ROOT / script).read_text().splitlines() if line.strip()]
    code = [line for line in lines if not line.startswith("#")]
    assert code[0] == "{" and code[-2:] == ["exit", "}"], script
    assert subprocess.run(["bash", "-n", str(ROOT / script)]).returncode == 0


# the recipes and the scripts the docs give (not the records of past runs under lab/results/)
SCRIPTS = sorted(
    str(p.relative_to(ROOT))
    for p in [
        *RECIPES.glob("*.sh"),
        *(ROOT / "docs").glob("*.sh"),
        *(ROOT / "docs" / "recipes").glob("*.sh"),
        *(ROOT / "lab" / "bench").glob("*.sh"),
    ]
)


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_call_python3_not_python(script):
    """Issue 69.18 / 70.7: with only /usr/bin on the PATH there may be no `python`: every script runs "$PYTHON",
    python3 unless the caller sets it, as the README's commands do."""
    code = [line for line in (ROOT / script).read_text().splitlines() if not line.lstrip().startswith("#")]
    bare = [line for line in code if re.search(r"(^|[\s(;|&`])python\s", line)]
    assert bare == [], script
    if any('"$PYTHON"' in line for line in code):
        assert any(line.startswith("PYTHON=${PYTHON:-python3}") for line in code), script


@pytest.mark.parametrize("script", ["docs/quickstart.sh", "docs/recipes/own_data.sh"])
def test_the_user_scripts_decode_as_the_results_recommend(script):
    """Issue 70.8: the quickstart and own_data.sh decoded greedily without blocking ("a man is reading a reading
    a reading ..."); every translate.py and calibrate_offsets.py call now searches with beam 5 and 3-gram
    blocking (docs/results.md's beam table; the quickstart model's validation set: greedy 31.49, both 33.71)."""
    text = (ROOT / script).read_text()
    joined = text.replace("\\\n", " ")  # each command on one line
    calls = re.findall(r'^"\$PYTHON" (?:translate\.py|tools/calibrate_offsets\.py).*$', joined, re.M)
    assert calls, script
    for call in calls:
        assert "DECODE" in call, call
    assert "-beam_size 5 -block_ngram_repeat 3" in text


SCREEN_STUB = r"""#!/usr/bin/env bash
case $1 in
  train.py) echo "$*" >> "$STUB_LOG" ;;
  lab/tools/screen_table.py) shift; echo "table $*" ;;
  *) echo "stub python: unexpected $1" >&2; exit 3 ;;
esac
"""


def test_tiny_screen_trains_each_setting_into_its_folder_and_tables_them(tmp_path):
    """lab/recipes/tiny_screen.sh: one run per NAME:FLAGS item, the preset plus its flags, resumable, into
    SCREEN_OUT/continuous.NAME.sSEED, then screen_table.py against the preset's run; a bad item is refused."""
    repo = tmp_path / "repo"
    (repo / "lab" / "recipes").mkdir(parents=True)
    shutil.copy(RECIPES / "tiny_screen.sh", repo / "lab" / "recipes")
    stub = tmp_path / "python"
    stub.write_text(SCREEN_STUB)
    stub.chmod(stat.S_IRWXU)
    out = tmp_path / "out"
    (out / "srcbpe").mkdir(parents=True)
    (out / "srcbpe" / "emb.dec.pt").write_text("x")
    env = {
        **os.environ,
        "PYTHON": str(stub),
        "OUT": str(out),
        "STUB_LOG": str(tmp_path / "calls"),
        "SCREENS": "drop0.0:-dropout 0.0;neg512:-num_sampled 512 -seed_data 3",
        "STEPS": "100",
        "JOBS": "2",
    }
    script = repo / "lab" / "recipes" / "tiny_screen.sh"
    res = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    calls = sorted((tmp_path / "calls").read_text().splitlines())
    assert len(calls) == 2
    assert calls[0].endswith("-train_steps 100 -dropout 0.0")
    assert f"{out}/screen/continuous.drop0.0.s1/model" in calls[0]
    assert calls[1].endswith("-num_sampled 512 -seed_data 3") and "-resume auto" in calls[1]
    assert res.stdout.strip() == (
        f"table -run preset {out}/continuous.s1/train.log -run drop0.0 {out}/screen/continuous.drop0.0.s1/train.log "
        f"-run neg512 {out}/screen/continuous.neg512.s1/train.log"
    )
    bad = subprocess.run(["bash", str(script)], capture_output=True, text=True, env={**env, "SCREENS": "a b"})
    assert bad.returncode == 2 and "NAME:FLAGS items" in bad.stderr
