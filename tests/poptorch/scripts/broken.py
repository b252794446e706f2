# A script whose model has a bug: the error is the script's own.
import torch

import poptorch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x.reshape(-1, 5)).sum()


model = poptorch.trainingModel(Model(), poptorch.Options())
model(torch.randn(8, 4))
