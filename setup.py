"""bert_tf: BERT pre-training and fine-tuning for TensorFlow 2 / Keras 3."""

import setuptools

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
]

TEST_REQUIRES = ["pytest>=7", "scipy>=1.10"]

CONSOLE_SCRIPTS = [
    "bert_create_pretraining_data=data_prep.create_pretraining_data:run_main",
    "bert_build_vocab=data_prep.build_vocab:run_main",
]

setuptools.setup(
    name="bert_tf",
    version="0.1.0",
    description="BERT pre-training and fine-tuning for TensorFlow 2 / Keras 3",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["bert_tf", "bert_tf.*", "data_prep", "data_prep.*"]),
    py_modules=[],
    install_requires=INSTALL_REQUIRES,
    extras_require={"test": TEST_REQUIRES},
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
