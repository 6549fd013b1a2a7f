# memscope run: the `sitecustomize.py` every Python process of the program imports at start.
#
# Written in the Python that every interpreter can parse (2.7 and 3.0 onwards: no f-strings,
# no annotations), because the program may start any of them: a Python 3.6 helper, a build
# tool. It compiles the recorder (`_memscope_recorder.py`, beside this file) first; on an
# interpreter too old for it (a SyntaxError) it steps aside: it runs the `sitecustomize` it
# hides, says once that this process is not recorded, and the program goes on unchanged.
import os
import sys


def _memscope_norm(p):
    return os.path.normcase(os.path.abspath(p or os.getcwd()))


def _memscope_chain(here):
    """Runs the `sitecustomize` this file hides on sys.path, if any (any Python)."""
    path = [p for p in sys.path if _memscope_norm(p) != _memscope_norm(here)]
    try:
        import importlib.machinery
        import importlib.util
        find = importlib.machinery.PathFinder.find_spec
        make = importlib.util.module_from_spec
    except (ImportError, AttributeError):
        find = None
    if find is not None:
        spec = find("sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        module = make(spec)
        spec.loader.exec_module(module)
        return
    import imp
    try:
        found = imp.find_module("sitecustomize", path)
    except ImportError:
        return
    try:
        imp.load_module("_memscope_hidden_sitecustomize", *found)
    finally:
        if found[0] is not None:
            found[0].close()


def _memscope_boot():
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.join(here, "_memscope_recorder.py")
    try:
        with open(source) as f:
            code = compile(f.read(), source, "exec")
    except (SyntaxError, IOError, OSError):
        code = None
    if code is None:
        _memscope_chain(here)
        if os.environ.get("MEMSCOPE_RUN_DIR"):
            sys.stderr.write(
                "memscope: Python %d.%d is too old for the recorder; this process is not recorded\n"
                % sys.version_info[:2])
        return
    module = type(sys)("_memscope_recorder")
    module.__file__ = source
    sys.modules["_memscope_recorder"] = module
    exec(code, module.__dict__)
    module.boot(here)


if __name__ == "sitecustomize":
    _memscope_boot()
