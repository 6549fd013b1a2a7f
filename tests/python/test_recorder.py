"""The Python side of `memscope run` and `memscope.capture()`, against a stand-in torch.

Each case runs a real Python process the way `memscope run` sets it up: the recorder as
`sitecustomize.py` first on PYTHONPATH, the settings in `MEMSCOPE_*`, `fake_torch/` as torch.
The stand-in logs every call and `_dump_snapshot` copies a real snapshot, so what is checked is
what the recorder did: when recording started, with which settings, which files it wrote.
Run: `python3 -m unittest discover -s tests/python` (`.ci/run` does).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PKG = os.path.join(ROOT, "python")
RECORDER = os.path.join(PKG, "memscope", "_recorder.py")
BOOT = os.path.join(PKG, "memscope", "_boot.py")
FAKE_TORCH = os.path.join(HERE, "fake_torch")
SNAPSHOT = os.path.join(ROOT, "fixtures", "clean.pickle")

sys.path.insert(0, PKG)
from memscope import _find_bin, _recorder  # noqa: E402


class Sandbox:
    """A temporary directory with the recorder installed as sitecustomize."""

    def __init__(self, as_memscope_run=False):
        self.dir = tempfile.mkdtemp(prefix="memscope-test-")
        self.boot = os.path.join(self.dir, "boot")
        self.out = os.path.join(self.dir, "out")
        self.log = os.path.join(self.dir, "torch.log")
        os.makedirs(self.boot)
        if as_memscope_run:
            # As `memscope run` installs it: the boot file, the recorder beside it.
            shutil.copyfile(BOOT, os.path.join(self.boot, "sitecustomize.py"))
            shutil.copyfile(RECORDER, os.path.join(self.boot, "_memscope_recorder.py"))
        else:
            shutil.copyfile(RECORDER, os.path.join(self.boot, "sitecustomize.py"))

    def run(self, code, extra_path=(), argv=(), python=None, **env):
        script = os.path.join(self.dir, "train.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(code))
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("MEMSCOPE_") and k not in ("RANK", "LOCAL_RANK", "PYTHONPATH")}
        e.update(PYTHONPATH=os.pathsep.join([self.boot, *extra_path, FAKE_TORCH]),
                 MEMSCOPE_RUN_DIR=self.out, FAKE_TORCH_LOG=self.log, FAKE_TORCH_SNAPSHOT=SNAPSHOT)
        e.update(env)
        return subprocess.run([python or sys.executable, script, *argv], env=e,
                              capture_output=True, text=True, timeout=60)

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def written(self):
        return sorted(os.listdir(self.out)) if os.path.isdir(self.out) else []

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


TRAIN_OOM = """
    import torch
    x = torch.cuda.empty(16)
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
"""

TRAIN_OK = """
    import torch
    x = torch.cuda.empty(16)
    print("trained")
"""


def old_pythons():
    """Interpreters too old for the recorder found on this machine (pyenv's, or on PATH)."""
    found = []
    for name in ("python3.6", "python2.7"):
        for d in [os.path.expanduser("~/.pyenv/versions")]:
            if os.path.isdir(d):
                for v in sorted(os.listdir(d)):
                    exe = os.path.join(d, v, "bin", name)
                    if os.path.exists(exe):
                        found.append(exe)
        exe = shutil.which(name)
        if exe and not found:
            found.append(exe)
    return found


SITE_USER = "import os\nprint('USER-SITECUSTOMIZE')\n"

TRAIN_WORKERS = """
    import multiprocessing as mp, os, sys, torch

    def work():
        torch.cuda.empty(16)

    if __name__ == "__main__":
        x = torch.cuda.empty(16)
        p = mp.get_context("spawn").Process(target=work)
        p.start()
        p.join()
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # the forked child ends first, through the interpreter's exit
        os.waitpid(pid, 0)
        print(p.pid, pid)
"""


class BootUnderMemscopeRun(unittest.TestCase):
    """The boot file `memscope run` installs as sitecustomize, the recorder beside it."""

    def setUp(self):
        self.sb = Sandbox(as_memscope_run=True)

    def tearDown(self):
        self.sb.close()

    def test_records_as_the_recorder_does(self):
        r = self.sb.run(TRAIN_OOM)
        self.assertEqual(r.returncode, 1)
        self.assertIn("OutOfMemoryError", r.stderr)
        self.assertEqual(self.sb.written(), ["memscope-oom.pickle"])

    def test_every_process_writes_its_own_name_under_spawn_and_fork(self):
        r = self.sb.run(TRAIN_WORKERS, MEMSCOPE_SNAPSHOT_ON="exit")
        self.assertEqual(r.returncode, 0, r.stderr)
        spawned, forked = r.stdout.split()
        # The workers end first; the plain name still goes to the program's own process.
        self.assertEqual(self.sb.written(), sorted([
            "memscope-exit.pickle",
            "memscope-exit-pid%s.pickle" % spawned,
            "memscope-exit-pid%s.pickle" % forked,
        ]))

    def test_no_output_directory_unless_a_file_is_written(self):
        r = self.sb.run(TRAIN_OK)
        self.assertEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(self.sb.out))

    def test_an_interpreter_too_old_steps_aside_and_the_users_sitecustomize_runs(self):
        pythons = old_pythons()
        if not pythons:
            self.skipTest("no Python 3.6 or 2.7 on this machine")
        other = os.path.join(self.sb.dir, "other")
        os.makedirs(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write(SITE_USER)
        for exe in pythons:
            r = self.sb.run("print('ran')\n", extra_path=[other], python=exe)
            self.assertEqual(r.returncode, 0, (exe, r.stderr))
            self.assertEqual(r.stdout.split(), ["USER-SITECUSTOMIZE", "ran"], exe)
            self.assertNotIn("SyntaxError", r.stderr)
            self.assertIn("too old for the recorder", r.stderr)
            self.assertEqual(self.sb.written(), [])


class RunRecorder(unittest.TestCase):
    def setUp(self):
        self.sb = Sandbox()

    def tearDown(self):
        self.sb.close()

    def test_oom_escaping_writes_a_snapshot_and_keeps_the_traceback_and_exit_code(self):
        r = self.sb.run(TRAIN_OOM, MEMSCOPE_MAX_ENTRIES="12345", MEMSCOPE_STACKS="python")
        self.assertEqual(r.returncode, 1)
        self.assertIn("torch.OutOfMemoryError: CUDA out of memory", r.stderr)
        self.assertEqual(self.sb.written(), ["memscope-oom.pickle"])
        import pickle
        with open(os.path.join(self.sb.out, "memscope-oom.pickle"), "rb") as f, open(SNAPSHOT, "rb") as g:
            written, original = pickle.load(f), pickle.load(g)
        # torch's snapshot, plus each device's memory size (for `memscope plan`'s cap).
        # Beside it (issue #41): the NCCL settings and ranks (none here), the current device and
        # NVML's view, recorded as unavailable where there is no NVML (no GPU in this test).
        # And where it was taken (issue #40): torch's and CUDA's versions, the host, first.
        m = written.pop("memscope")
        self.assertEqual(list(m)[:3], ["torch_version", "cuda_version", "host"])
        self.assertEqual(m, {
            "torch_version": "2.11.0+cu128", "cuda_version": "12.8", "host": socket.gethostname(),
            "devices": [{"index": 0, "total_memory": 85017493504, "nvml": {"available": False}}],
            "current_device": None, "nccl_env": {}})
        self.assertEqual(written, original)
        events = [c["event"] for c in self.sb.calls()]
        # Recording starts right after CUDA initialises, before anything else; one dump.
        self.assertEqual(events, ["import", "lazy_init", "record", "dump", "props"])
        rec = self.sb.calls()[2]
        self.assertEqual((rec["enabled"], rec["context"], rec["stacks"], rec["max_entries"]),
                         ("all", "all", "python", 12345))

    def test_an_oom_raised_outside_the_allocator_writes_a_snapshot_with_its_error(self):
        r = self.sb.run("""
            import torch
            x = torch.cuda.empty(16)
            raise RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error "
                               "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\\n"
                               "ncclUnhandledCudaError: Call to CUDA function failed.\\n"
                               "Last error:\\nFailed to CUDA calloc async 1216 bytes" + "x" * 5000)
        """, NCCL_BUFFSIZE="1048576", RANK="1", WORLD_SIZE="2")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.sb.written(), ["memscope-oom-rank1.pickle"])
        import pickle
        with open(os.path.join(self.sb.out, "memscope-oom-rank1.pickle"), "rb") as f:
            m = pickle.load(f)["memscope"]
        self.assertEqual(m["error"]["source"], "nccl")
        self.assertEqual(m["error"]["type"], "RuntimeError")
        self.assertIn("Failed to CUDA calloc", m["error"]["message"])
        self.assertLessEqual(len(m["error"]["message"]), 2000)
        self.assertEqual((m["nccl_env"], m["rank"], m["world_size"]), ({"NCCL_BUFFSIZE": "1048576"}, 1, 2))

    def test_cudnns_internal_error_on_a_full_card_is_read_as_an_oom_with_its_evidence(self):
        # What cuDNN raised on an H200 filled to 3.1 MiB free (fixtures/device41/cudnn_fill).
        script = """
            import torch
            x = torch.cuda.empty(16)
            raise RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR")
        """
        r = self.sb.run(script, FAKE_TORCH_FREE=str(3276800))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.sb.written(), ["memscope-oom.pickle"])
        import pickle
        with open(os.path.join(self.sb.out, "memscope-oom.pickle"), "rb") as f:
            e = pickle.load(f)["memscope"]["error"]
        self.assertEqual((e["source"], e["reading"], e["free_at_error"], e["full_below"]),
                         ("cudnn", "internal_error_full_card", 3276800, 256 << 20))

    def test_cudnns_internal_error_with_room_on_the_card_is_not_an_oom(self):
        r = self.sb.run("""
            import torch
            x = torch.cuda.empty(16)
            raise RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR")
        """, FAKE_TORCH_FREE=str(10 << 30))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.sb.written(), [])

    def test_os_exit_still_writes_the_exit_snapshot(self):
        r = self.sb.run("""
            import os, torch
            x = torch.cuda.empty(16)
            os._exit(0)
        """, MEMSCOPE_SNAPSHOT_ON="exit")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(self.sb.written(), ["memscope-exit.pickle"])

    def test_oom_as_the_cause_of_another_exception_counts(self):
        r = self.sb.run("""
            import torch
            x = torch.cuda.empty(16)
            try:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory")
            except RuntimeError as e:
                raise ValueError("batch failed") from e
        """)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.sb.written(), ["memscope-oom.pickle"])

    def test_other_errors_and_clean_exits_write_nothing_by_default(self):
        r = self.sb.run("""
            import torch
            x = torch.cuda.empty(16)
            raise KeyError("not memory")
        """)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.sb.written(), [])
        r = self.sb.run(TRAIN_OK)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "trained"))
        self.assertEqual(self.sb.written(), [])

    def test_snapshot_on_exit_and_both(self):
        r = self.sb.run(TRAIN_OK, MEMSCOPE_SNAPSHOT_ON="exit")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(self.sb.written(), ["memscope-exit.pickle"])
        shutil.rmtree(self.sb.out)
        # `both` with an OOM: the OOM snapshot only (the exit one would hold the same history).
        r = self.sb.run(TRAIN_OOM, MEMSCOPE_SNAPSHOT_ON="both")
        self.assertEqual(self.sb.written(), ["memscope-oom.pickle"])
        shutil.rmtree(self.sb.out)
        r = self.sb.run(TRAIN_OK, MEMSCOPE_SNAPSHOT_ON="both")
        self.assertEqual(self.sb.written(), ["memscope-exit.pickle"])

    def test_a_process_that_never_initialises_cuda_records_nothing(self):
        r = self.sb.run("import torch\nprint('cpu only')\n", MEMSCOPE_SNAPSHOT_ON="both")
        self.assertEqual(r.returncode, 0)
        self.assertEqual([c["event"] for c in self.sb.calls()], ["import"])
        self.assertEqual(self.sb.written(), [])

    def test_a_program_without_torch_is_untouched(self):
        r = self.sb.run("import sys\nprint(sorted(m for m in sys.modules if m == 'torch'))\n")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "[]"))

    def test_rank_in_the_name_under_torchrun(self):
        self.sb.run(TRAIN_OOM, RANK="3", LOCAL_RANK="1")
        self.sb.run(TRAIN_OOM, LOCAL_RANK="2")
        self.assertEqual(self.sb.written(), ["memscope-oom-rank2.pickle", "memscope-oom-rank3.pickle"])

    def test_an_existing_file_is_not_overwritten(self):
        self.sb.run(TRAIN_OOM)
        self.sb.run(TRAIN_OOM)
        names = self.sb.written()
        self.assertEqual(len(names), 2)
        self.assertIn("memscope-oom.pickle", names)
        names.remove("memscope-oom.pickle")
        self.assertRegex(names[0], r"^memscope-oom-pid\d+\.pickle$")

    def test_torchruns_launcher_is_left_alone(self):
        r = self.sb.run(TRAIN_OOM.replace("import torch", "import sys; sys.argv[0] = 'torchrun'\nimport torch"))
        self.assertEqual(r.returncode, 1)  # sys.argv was set after the recorder looked: still recorded
        self.assertFalse(_recorder._is_launcher(["/usr/bin/python3", "train.py"]))
        self.assertTrue(_recorder._is_launcher(["/usr/bin/python3", "/venv/bin/torchrun", "train.py"]))
        self.assertTrue(_recorder._is_launcher(["python3", "-m", "torch.distributed.run", "t.py"]))

    def test_the_hidden_sitecustomize_still_runs(self):
        other = os.path.join(self.sb.dir, "other")
        os.makedirs(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['OTHER_SITECUSTOMIZE'] = 'ran'\n")
        r = self.sb.run("""
            import os, torch
            print(os.environ.get('OTHER_SITECUSTOMIZE'))
            x = torch.cuda.empty(16)
            raise torch.OutOfMemoryError("CUDA out of memory")
        """, extra_path=[other])
        self.assertIn("ran", r.stdout)
        self.assertEqual(self.sb.written(), ["memscope-oom.pickle"])

    def test_a_replaced_excepthook_still_gets_the_oom_snapshot_at_exit(self):
        r = self.sb.run("import sys\nsys.excepthook = lambda *a: print('own hook')\n" + textwrap.dedent(TRAIN_OOM))
        self.assertEqual(r.returncode, 1)
        self.assertIn("own hook", r.stdout)
        self.assertEqual(self.sb.written(), ["memscope-oom.pickle"])

    def test_profile_steps_cover_optimizer_steps_a_to_b(self):
        r = self.sb.run("""
            import torch
            x = torch.cuda.empty(16)
            opt = torch.optim.Optimizer()
            for i in range(6):
                opt.step()
        """, MEMSCOPE_PROFILE_STEPS="2:4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.sb.written(), ["memscope-trace.json"])
        with open(os.path.join(self.sb.out, "memscope-trace.json")) as f:
            self.assertEqual(json.load(f)["fake_steps"], [2, 3, 4])  # ProfilerStep#2..#4
        start = [c for c in self.sb.calls() if c["event"] == "prof_start"][0]
        self.assertEqual((start["profile_memory"], start["with_stack"], start["record_shapes"],
                          start["schedule"]), (True, True, True, True))
        self.assertIn("(steps 2..4)", r.stderr)

    def test_profile_steps_cut_short_are_still_written(self):
        r = self.sb.run("""
            import torch
            x = torch.cuda.empty(16)
            opt = torch.optim.Optimizer()
            for i in range(2):
                opt.step()
        """, MEMSCOPE_PROFILE_STEPS="1:5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("(steps 1..2)", r.stderr)
        self.assertEqual(self.sb.written(), ["memscope-trace.json"])

    def test_max_steps_ends_the_program_and_writes_the_exit_snapshot(self):
        r = self.sb.run("""
            import torch
            x = torch.cuda.empty(16)
            opt = torch.optim.Optimizer()
            for i in range(10):
                opt.step()
                print("step", i + 1)
        """, MEMSCOPE_SNAPSHOT_ON="exit", MEMSCOPE_MAX_STEPS="3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["step", "1", "step", "2"])
        self.assertIn("stopping the program after 3 optimizer steps", r.stderr)
        self.assertEqual(self.sb.written(), ["memscope-exit.pickle"])

    def test_bad_settings_say_so_and_run_the_program_anyway(self):
        r = self.sb.run(TRAIN_OK, MEMSCOPE_PROFILE_STEPS="5:2")
        self.assertEqual(r.returncode, 0)
        self.assertIn("memscope: '5:2': steps count from 1 and A <= B; not recording", r.stderr)


class Helpers(unittest.TestCase):
    def test_parse_max_steps(self):
        self.assertEqual(_recorder.parse_max_steps("3"), 3)
        self.assertIsNone(_recorder.parse_max_steps(None))
        for bad in ("0", "-1", "x"):
            with self.assertRaises(ValueError):
                _recorder.parse_max_steps(bad)

    def test_parse_profile_steps(self):
        self.assertEqual(_recorder.parse_profile_steps("3:5"), (3, 5))
        self.assertEqual(_recorder.parse_profile_steps("2:2"), (2, 2))
        self.assertIsNone(_recorder.parse_profile_steps(""))
        for bad in ("3", "0:2", "a:b", "4:3", "-1:2"):
            with self.assertRaises(ValueError):
                _recorder.parse_profile_steps(bad)

    def test_rank_suffix(self):
        self.assertEqual(_recorder.rank_suffix({}), "")
        self.assertEqual(_recorder.rank_suffix({"RANK": "7", "LOCAL_RANK": "3"}), "-rank7")
        self.assertEqual(_recorder.rank_suffix({"LOCAL_RANK": "3"}), "-rank3")
        self.assertEqual(_recorder.rank_suffix({"RANK": "x"}), "")

    def test_origin_records_versions_and_host_and_leaves_out_what_fails(self):
        class Torch:
            __version__ = "2.5.1"

            class version:
                cuda = None  # a CPU build

        self.assertEqual(_recorder.origin(Torch),
                         {"torch_version": "2.5.1", "cuda_version": None, "host": socket.gethostname()})

        class Broken:
            @property
            def version(self):
                raise RuntimeError("no")

        got = _recorder.origin(Broken())
        self.assertEqual(got, {"host": socket.gethostname()})
        self.assertTrue(all(len(v) <= 255 for v in got.values()))

    def test_recorder_checks_its_arguments(self):
        with self.assertRaises(ValueError):
            _recorder.Recorder("d", snapshot_on="never")
        with self.assertRaises(ValueError):
            _recorder.Recorder("d", stacks="cpp")


class _Card:
    """A stand-in CUDA runtime for the context measurement: a device with or without its
    primary context, the allocator's reserved bytes, and NVML's bytes for this process."""

    def __init__(self, context=False, reserved=0, context_bytes=518 << 20):
        self.context, self.reserved, self.context_bytes, self.device = context, reserved, context_bytes, 0
        self.calls = []
        card = self

        class C:
            @staticmethod
            def _cuda_hasPrimaryContext(i):
                return card.context

        class Cuda:
            @staticmethod
            def current_device():
                return card.device

            @staticmethod
            def set_device(i):
                card.calls.append(("set_device", i))
                card.device = i

            @staticmethod
            def mem_get_info(i):
                card.calls.append(("mem_get_info", i))
                card.context = True
                return (1, 2)

            @staticmethod
            def memory_reserved(i):
                return card.reserved

        class Dist:
            @staticmethod
            def init_process_group(*a, **k):
                card.calls.append(("init_process_group", card.context))
                card.reserved += 10 << 20  # NCCL would grow outside; the allocator here

        self.torch = type("T", (), {"_C": C, "cuda": Cuda, "distributed": Dist})

    def nvml_usage(self, torch, i):
        own = (self.context_bytes + self.reserved) if self.context else 0
        return {"available": True, "process_self": own}


class ContextMeasurement(unittest.TestCase):
    def setUp(self):
        self.saved = _recorder.nvml_usage

    def tearDown(self):
        _recorder.nvml_usage = self.saved

    def card(self, **kw):
        card = _Card(**kw)
        _recorder.nvml_usage = card.nvml_usage
        return card

    def test_the_context_is_nvmls_bytes_for_the_process_less_reserved(self):
        card = self.card(context=True, reserved=20 << 20)
        m = _recorder.measure_context(card.torch, "set_device")
        self.assertEqual((m["device"], m["bytes"], m["source"], m["moment"], m["reserved"]),
                         (0, 518 << 20, "nvml_process_less_reserved", "set_device", 20 << 20))

    def test_no_context_is_made_unless_asked(self):
        card = self.card()
        self.assertIsNone(_recorder.measure_context(card.torch, "cuda_init"))
        self.assertEqual(card.calls, [])
        m = _recorder.measure_context(card.torch, "set_device", create=True)
        self.assertEqual((card.calls, m["bytes"]), ([("mem_get_info", 0)], 518 << 20))

    def test_nvml_not_listing_the_process_measures_nothing(self):
        card = self.card(context=True, context_bytes=0)
        self.assertIsNone(_recorder.measure_context(card.torch, "set_device"))

    def test_measured_once_right_after_set_device_on_the_device_chosen(self):
        card = self.card()
        rec = _recorder.Recorder("d", torch=card.torch)
        rec.recording = True
        _recorder.hook_context_measurement(rec, card.torch)
        _recorder.hook_context_measurement(rec, card.torch)  # wrapped once only
        card.torch.cuda.set_device(1)
        self.assertEqual((rec.context["device"], rec.context["moment"]), (1, "set_device"))
        card.torch.distributed.init_process_group("nccl")
        self.assertEqual(rec.context["moment"], "set_device")
        self.assertEqual(card.calls, [("set_device", 1), ("mem_get_info", 1), ("init_process_group", True)])

    def test_without_set_device_before_init_process_group_if_a_context_exists(self):
        card = self.card()
        rec = _recorder.Recorder("d", torch=card.torch)
        rec.recording = True
        _recorder.hook_context_measurement(rec, card.torch)
        card.torch.distributed.init_process_group("nccl")
        self.assertIsNone(rec.context)  # no context yet: none made on a guessed device
        card.context = True
        card.torch.distributed.init_process_group("nccl")
        # measured before NCCL's setup: what it adds is not counted as context
        self.assertEqual((rec.context["moment"], rec.context["bytes"]), ("init_process_group", 518 << 20))


class Capture(unittest.TestCase):
    """`memscope.capture()` as a context manager and a decorator, in a process with the stand-in."""

    def run_py(self, code, out, log):
        e = dict(os.environ, PYTHONPATH=os.pathsep.join([PKG, FAKE_TORCH]),
                 FAKE_TORCH_SNAPSHOT=SNAPSHOT, FAKE_TORCH_LOG=log)
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code), out], env=e,
                              capture_output=True, text=True, timeout=60)

    def test_context_manager_and_decorator(self):
        out = tempfile.mkdtemp()
        log = os.path.join(tempfile.mkdtemp(), "torch.log")
        try:
            r = self.run_py("""
                import sys, torch, memscope
                out = sys.argv[1]
                cap = memscope.capture(out, snapshot_on="both", max_entries=500)
                try:
                    with cap:
                        raise torch.OutOfMemoryError("CUDA out of memory")
                except torch.OutOfMemoryError:
                    print("re-raised")
                print([p.rsplit('/', 1)[1] for p in cap.written])

                @memscope.capture(out, snapshot_on="exit")
                def train():
                    return 42
                print(train())
                with memscope.capture(out):
                    pass
            """, out, log)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split("\n")[:3], ["re-raised", "['memscope-oom.pickle']", "42"])
            self.assertEqual(sorted(os.listdir(out)), ["memscope-exit.pickle", "memscope-oom.pickle"])
            with open(log) as f:
                events = [json.loads(line)["event"] for line in f]
            # CUDA is initialised before recording starts; each use records, dumps and stops.
            self.assertEqual(events[:4], ["import", "lazy_init", "record", "dump"])
            self.assertEqual(events.count("record"), 2 * 3)  # start and stop, three uses
        finally:
            shutil.rmtree(out)


class FindBin(unittest.TestCase):
    def test_prefix_and_target_layouts(self):
        prefix_pkg = os.path.join("/opt", "p", "lib", "python3.11", "site-packages", "memscope")
        self.assertIn(os.path.join("/opt", "p", "bin"), _find_bin.candidate_dirs(prefix_pkg))
        target_pkg = os.path.join("/opt", "t", "memscope")
        self.assertEqual(_find_bin.candidate_dirs(target_pkg)[-1], os.path.join("/opt", "t", "bin"))
        # Fedora / RHEL put a platform wheel under lib64; Debian's Python under local/.../dist-packages.
        lib64_pkg = os.path.join("/opt", "q", "lib64", "python3.9", "site-packages", "memscope")
        self.assertIn(os.path.join("/opt", "q", "bin"), _find_bin.candidate_dirs(lib64_pkg))
        deb_pkg = os.path.join("/opt", "d", "local", "lib", "python3.11", "dist-packages", "memscope")
        self.assertIn(os.path.join("/opt", "d", "local", "bin"), _find_bin.candidate_dirs(deb_pkg))
        # Not a prefix layout: no `bin` beside `lib`.
        other = os.path.join("/opt", "x", "python3.11", "site-packages", "memscope")
        self.assertNotIn(os.path.join("/opt", "bin"), _find_bin.candidate_dirs(other))

    def test_python_m_memscope_runs_the_binary_of_a_target_install(self):
        t = tempfile.mkdtemp()
        try:
            shutil.copytree(os.path.join(PKG, "memscope"), os.path.join(t, "memscope"))
            os.makedirs(os.path.join(t, "bin"))
            exe = os.path.join(t, "bin", "memscope")
            with open(exe, "w") as f:
                f.write('#!/bin/sh\necho "fake memscope $*"\nexit 3\n')
            os.chmod(exe, 0o755)
            e = dict(os.environ, PYTHONPATH=t)
            r = subprocess.run([sys.executable, "-m", "memscope", "analyze", "x.pickle"], env=e,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual((r.returncode, r.stdout), (3, "fake memscope analyze x.pickle\n"))
        finally:
            shutil.rmtree(t)


if __name__ == "__main__":
    unittest.main()
