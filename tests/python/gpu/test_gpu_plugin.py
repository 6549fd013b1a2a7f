"""Real GPU tests for memscope's pytest plugin (run on a CUDA machine, not in CI):

    MEMSCOPE_BIN=target/release/memscope pytest -p memscope.pytest_plugin tests/python/gpu -v

`test_leaky_step` keeps each step's activations in a module-level list (a real leak): it must
fail with memscope's leak finding. `test_clean_step` and `test_peak_within` must pass;
`test_peak_over` must fail on memscope's max-peak rule. Each body is one training step.
"""

import pytest
import torch

KEPT = []


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                               torch.nn.Linear(4096, 1024)).cuda()


MODEL = None
OPT = None


def _step(keep=False):
    global MODEL, OPT
    if MODEL is None:
        MODEL = _model()
        OPT = torch.optim.SGD(MODEL.parameters(), lr=0.01)
    x = torch.randn(256, 1024, device="cuda")
    hidden = MODEL(x)
    loss = hidden.pow(2).mean()
    loss.backward()
    OPT.step()
    OPT.zero_grad(set_to_none=True)
    if keep:
        KEPT.append(hidden.detach() * 1.0)  # the leak: one 1 MiB tensor kept per step


@pytest.mark.cuda_no_leak(warmup=2, steps=8)
def test_leaky_step():
    _step(keep=True)


@pytest.mark.cuda_no_leak(warmup=2, steps=8)
def test_clean_step():
    _step()


@pytest.mark.cuda_memory(max_peak="2 GiB")
def test_peak_within():
    _step()


@pytest.mark.cuda_memory(max_peak="1 MiB")
def test_peak_over():
    _step()
