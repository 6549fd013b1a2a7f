# As in torch, `torch.optim.optimizer` is a submodule that need not be an attribute here.
from torch.optim.optimizer import Optimizer  # noqa: F401

del optimizer  # noqa: F821
