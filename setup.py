"""bert_tf: BERT pre-training and fine-tuning for TensorFlow 2 / Keras 3."""

import pathlib

import setuptools

HERE = pathlib.Path(__file__).parent

# tensorflow-text ships one build per TensorFlow minor version: keep the two ranges in step.
INSTALL_REQUIRES = [
    "tensorflow>=2.21,<2.22",
    "tensorflow-text>=2.21,<2.22",
    "keras>=3.10,<4",
    "absl-py>=1.0",
    "numpy>=1.26",
    "mwparserfromhell>=0.6,<0.8",
    "pysbd>=0.3.4,<0.4",
    "safetensors>=0.4",
    "google-crc32c>=1.5",  # TFRecord checksums in create_pretraining_data, without TensorFlow
]

TEST_REQUIRES = ["pytest>=7", "pytest-xdist>=3", "pytest-randomly>=3", "scipy>=1.10",
                 "hypothesis>=6"]

# create_pretraining_data and build_vocab on Apache Beam (Dataflow, Flink, Spark, or the
# DirectRunner). 2.77 installs beside TensorFlow 2.21 (it pins protobuf < 7, which
# TensorFlow 2.21 accepts); google-crc32c is the fast TFRecord checksum Beam looks for.
BEAM_REQUIRES = ["apache-beam>=2.77,<2.78", "google-crc32c>=1.5"]

# Chinese word segmentation for whole-word masking (create_pretraining_data
# --word_segmenter=jieba).
CHINESE_REQUIRES = ["jieba>=0.42"]

# bert-export-model --export_format=keras_hub (keras-hub writes the preset). Pinned to
# the minor version whose BertBackbone variable paths the exporter maps; it installs
# beside TensorFlow 2.21 and Keras 3 without changing them.
KERAS_HUB_REQUIRES = ["keras-hub>=0.32,<0.33"]

# tests/test_export_formats.py loads the --export_format=huggingface folders with
# transformers on PyTorch, tests/test_lora_peft.py the --export_format=peft folders with
# PEFT (gigabytes: not in `make install-extras`; see docs/export_formats.md, or point
# BERT_TF_REFERENCE_PYTHON at a Python that has them).
HUGGINGFACE_TEST_REQUIRES = ["torch>=2.1", "transformers>=4.40", "peft>=0.13"]

# tests/test_export_tfhub.py loads the --export_format=tfhub SavedModels with TF Hub's
# own hub.KerasLayer, a Keras 2 layer: under Keras 3 it needs tf_keras (the Keras 2 of
# the same TensorFlow minor version). Neither changes tensorflow or keras.
TFHUB_TEST_REQUIRES = ["tensorflow-hub>=0.16,<0.17", "tf-keras>=2.21,<2.22"]

# tests/test_export_litert.py runs the --export_format=litert models in the LiteRT
# interpreter (ai-edge-litert, ~60 MB; it leaves tensorflow and numpy as they are).
LITERT_TEST_REQUIRES = ["ai-edge-litert>=2.1,<3"]

# bert-export-model --export_format=onnx converts with tf2onnx (the ids signature to an
# ONNX graph) and quantizes with onnxruntime; tests/test_export_onnx.py runs the files
# in onnxruntime. tf2onnx 1.17 installs beside TensorFlow 2.21 and protobuf 6.
ONNX_REQUIRES = ["tf2onnx>=1.17,<1.18", "onnx>=1.16", "onnxruntime>=1.20"]

# bert-search: hyperparameter search on Optuna (its SQLite storage needs nothing more;
# a shared PostgreSQL / MySQL storage needs that database's SQLAlchemy driver too).
SEARCH_REQUIRES = ["optuna>=3"]

# Every command module defines `run_main()`; its console script is `bert-<module-name>`,
# e.g. bert_tf/cli/run_squad.py -> bert-run-squad, data_prep/build_vocab.py ->
# bert-build-vocab. The root scripts (run_squad.py, ...) are thin shims, not installed.
CLI_MODULES = sorted(p.stem for p in (HERE / "bert_tf" / "cli").glob("*.py")
                     if p.stem not in ("__init__", "common"))
DATA_PREP_CLIS = sorted(
    p.stem for name in ("create_pretraining_data.py", "build_vocab.py", "extend_vocab.py")
    for p in (HERE / "data_prep").glob(name))
# The same two on Apache Beam (they say to install the `beam` extra when it is missing).
BEAM_CLIS = {"bert-create-pretraining-data-beam": "data_prep.beam_pipeline",
             "bert-build-vocab-beam": "data_prep.beam_vocab"}
CONSOLE_SCRIPTS = (
    [f"bert-{m.replace('_', '-')}=bert_tf.cli.{m}:run_main" for m in CLI_MODULES]
    + [f"bert-{m.replace('_', '-')}=data_prep.{m}:run_main" for m in DATA_PREP_CLIS]
    + [f"{script}={module}:run_main" for script, module in BEAM_CLIS.items()])

setuptools.setup(
    name="bert_tf",
    version="0.1.0",
    description="BERT pre-training and fine-tuning for TensorFlow 2 / Keras 3",
    long_description=(HERE / "README.md").open(encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["bert_tf", "bert_tf.*", "data_prep", "data_prep.*"]),
    install_requires=INSTALL_REQUIRES,
    extras_require={"test": TEST_REQUIRES, "beam": BEAM_REQUIRES,
                    "chinese": CHINESE_REQUIRES, "keras-hub": KERAS_HUB_REQUIRES,
                    "huggingface-test": HUGGINGFACE_TEST_REQUIRES,
                    "tfhub-test": TFHUB_TEST_REQUIRES, "litert-test": LITERT_TEST_REQUIRES,
                    "onnx": ONNX_REQUIRES, "search": SEARCH_REQUIRES},
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
