"""Stand-in modules for TensorFlow, Keras and tensorflow-text while `--help` is shown.

`--help` needs a command's options classes, which live beside the code that uses
TensorFlow. Importing TensorFlow takes seconds; the help needs none of it. `install()`
makes `import tensorflow` (and keras, tensorflow_text, their submodules) give stand-ins
whose every attribute, call, subscript and base class is another stand-in, so that the
command modules import and their options (plain dataclasses) are read. Nothing may run
afterwards: `bert_tf.command_line` prints the help and exits.
"""

import importlib.abc
import importlib.machinery
import sys
import types

STUBBED = ("tensorflow", "keras", "tensorflow_text", "tf_keras", "tensorflow_hub",
           "tf2onnx", "onnx", "onnxruntime", "ai_edge_litert", "keras_hub")


class _Stub:
    """Any attribute, call, item or operation of a stand-in gives a stand-in."""

    def __init__(self, name="stub"):
        self._name = name

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self._name}.{name}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and (isinstance(args[0], type)
                                              or callable(args[0])):
            return args[0]  # a decorator keeps what it decorates
        return _Stub(f"{self._name}()")

    def __mro_entries__(self, bases):
        return (type(self._name.rsplit(".", 1)[-1], (), {}),)  # a base class of its own

    def __getitem__(self, key):
        return _Stub(f"{self._name}[]")

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __bool__(self):
        return False

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __str__(self):
        return self._name

    def __repr__(self):
        return f"<help stand-in {self._name}>"

    def __or__(self, other):
        return self

    __ror__ = __add__ = __radd__ = __sub__ = __mul__ = __rmul__ = __truediv__ = __or__
    __neg__ = __pos__ = lambda self: self

    def __eq__(self, other):
        return other is self

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__
    __hash__ = object.__hash__


class _StubModule(types.ModuleType):
    """A stand-in module: any attribute is a stand-in (submodules are modules)."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `STUBBED` packages and their submodules as `_StubModule`s."""

    def find_spec(self, fullname, path=None, target=None):
        del path, target
        if fullname.split(".", 1)[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0"
        return module

    def exec_module(self, module):
        del module


def install() -> None:
    """Makes the `STUBBED` packages import as stand-ins (for `--help` only)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
