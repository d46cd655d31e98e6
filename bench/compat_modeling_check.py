"""Real check: `bert_tf.compat.modeling.BertModel` (google-research's API over our encoder)
on the shared checkpoint equals transformers' `BertModel` on the same weights (issue 52:
1e-5), with google-research's own getters.

    .venv/bin/python bench/compat_modeling_check.py --reference_python=/tmp/refhf/bin/python

Our side: `modeling.BertConfig.from_json_file`, `tokenization.FullTokenizer`, a
`modeling.BertModel(is_training=False)` with `init_from_checkpoint` from the
google-research files. The transformers folder is our own `bert-export-model
--export_format=huggingface` of that checkpoint (its weights are the checkpoint's, renamed
and transposed); the reference script runs in `--reference_python` (torch and
transformers). Prints the largest absolute difference of each getter's output over the
real (unpadded) positions. Reads ../shared/data; not part of the test suite.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
from absl import app, flags

from bert_tf.compat import modeling, tokenization

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
CHECKPOINT = os.path.join(SHARED, "checkpoints", "uncased_L-6_H-384_A-12")
TEXTS = [("The quick brown fox jumps over the lazy dog.", "It was not amused."),
         ("BERT reads both sides of a word at once.", None),
         ("Café prices rose by 3.5% in Zürich, officials said on Tuesday.", "Why?")]

flags.DEFINE_string("reference_python", None, "A Python with torch and transformers.")
flags.DEFINE_integer("max_seq_length", 32, "Row length.")
FLAGS = flags.FLAGS


def encode(tokenizer, length):
    """int32 input_ids, input_mask, segment_ids [B, length], as run_classifier lays them."""
    rows = {name: np.zeros([len(TEXTS), length], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}
    for row, (text_a, text_b) in enumerate(TEXTS):
        tokens = ["[CLS]"] + tokenizer.tokenize(text_a) + ["[SEP]"]
        segments = [0] * len(tokens)
        if text_b:
            second = tokenizer.tokenize(text_b) + ["[SEP]"]
            tokens, segments = tokens + second, segments + [1] * len(second)
        ids = tokenizer.convert_tokens_to_ids(tokens[:length])
        rows["input_ids"][row, :len(ids)] = ids
        rows["input_mask"][row, :len(ids)] = 1
        rows["segment_ids"][row, :len(ids)] = segments[:length]
    return rows


def main(argv):
    del argv
    if not FLAGS.reference_python:
        sys.exit("compat_modeling_check: pass --reference_python (torch and transformers)")
    work = tempfile.mkdtemp(prefix="compat_modeling_")
    tokenizer = tokenization.FullTokenizer(os.path.join(CHECKPOINT, "vocab.txt"),
                                           do_lower_case=True)
    inputs = encode(tokenizer, FLAGS.max_seq_length)
    np.savez(os.path.join(work, "inputs.npz"), **inputs)
    config = modeling.BertConfig.from_json_file(os.path.join(CHECKPOINT, "bert_config.json"))
    model = modeling.BertModel(config, is_training=False, input_ids=inputs["input_ids"],
                               input_mask=inputs["input_mask"],
                               token_type_ids=inputs["segment_ids"])
    modeling.init_from_checkpoint(model, os.path.join(CHECKPOINT, "bert_model.ckpt"))
    ours = {"embedding_output": model.get_embedding_output(),
            "all_layers": np.stack([np.asarray(x) for x in model.get_all_encoder_layers()]),
            "sequence_output": model.get_sequence_output(),
            "pooled_output": model.get_pooled_output()}
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "bert-export-model"),
                    f"--init_checkpoint={CHECKPOINT}", "--model_type=encoder",
                    "--export_format=huggingface", f"--export_dir={work}/hf"], check=True)
    subprocess.run([FLAGS.reference_python, os.path.join(REPO, "bench",
                                                         "reference_compat_modeling.py"),
                    f"--work_dir={work}"], check=True)
    theirs = np.load(os.path.join(work, "reference.npz"))
    mask = inputs["input_mask"].astype(bool)  # [B, S]: padding positions are not compared
    worst = 0.0
    for name, value in ours.items():
        value = np.asarray(value)
        difference = np.abs(value - theirs[name])
        difference = difference[..., mask, :] if name != "pooled_output" else difference
        worst = max(worst, float(difference.max()))
        print(f"{name}: {value.shape}, max |ours - transformers| = {difference.max():.2e}")
    print(f"largest difference {worst:.2e} ({'within' if worst <= 1e-5 else 'ABOVE'} 1e-5); "
          f"work folder {work}")


if __name__ == "__main__":
    app.run(main)
