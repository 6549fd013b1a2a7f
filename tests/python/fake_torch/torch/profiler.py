import json

from torch import _log


class ProfilerActivity:
    CPU = "cpu"
    CUDA = "cuda"


class ProfilerAction:
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class profile:
    """As torch's: step markers (`ProfilerStep#N`) only when a schedule is given."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, profile_memory=False,
                 with_stack=False, record_shapes=False):
        self.kw = dict(activities=activities, profile_memory=profile_memory, with_stack=with_stack,
                       record_shapes=record_shapes, schedule=schedule is not None)
        self.schedule = schedule
        self.record_steps = schedule is not None
        self.step_num = 0
        self.steps = []

    def start(self):
        if self.record_steps:
            self.steps.append(self.step_num)
        _log("prof_start", step_num=self.step_num, **self.kw)

    def step(self):
        self.step_num += 1
        if self.record_steps:
            assert self.schedule(self.step_num) == ProfilerAction.RECORD
            self.steps.append(self.step_num)

    def stop(self):
        _log("prof_stop", step_num=self.step_num)

    def export_chrome_trace(self, path):
        with open(path, "w") as f:
            json.dump({"traceEvents": [], "fake_steps": self.steps}, f)
        _log("export", path=path)
