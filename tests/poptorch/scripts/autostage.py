# Blocks placed by ipu_id (AutoStage): the three ways PopTorch annotates blocks, no stages given.
import argparse

import torch
import torch.nn as nn

import poptorch

parser = argparse.ArgumentParser()
parser.add_argument("--auto-increment", action="store_true")
parser.add_argument("--calls", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = poptorch.BeginBlock(nn.Linear(32, 64), "embed", ipu_id=0)
        self.hidden = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.more = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.most = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 4)
        self.loss = nn.CrossEntropyLoss()

    @poptorch.BlockFunction("head", ipu_id=3)
    def classify(self, x, labels):
        logits = self.head(x)
        return logits, self.loss(logits, labels)

    def forward(self, x, labels):
        x = torch.relu(self.embed(x))
        with poptorch.Block("hidden", ipu_id=1):
            x = self.hidden(x)
        with poptorch.Block("more", ipu_id=2):
            x = self.more(x)
        with poptorch.Block("most", ipu_id=2):
            x = self.most(x)
        return self.classify(x, labels)


opts = poptorch.Options().deviceIterations(2).replicationFactor(2)
opts.Training.gradientAccumulation(10)
opts.logDir("/tmp").Jit.traceModel(True)
if args.auto_increment:
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))

data = torch.utils.data.TensorDataset(torch.randn(1024, 32), torch.randint(0, 4, (1024,)))
loader = poptorch.DataLoader(opts, data, batch_size=4, shuffle=True)
model = Classifier()
training_model = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                                                        loss_scaling=128.0))
for call, (x, y) in enumerate(loader):
    logits, loss = training_model(x, y)
    print(f"call {call}: logits {tuple(logits.shape)} loss {tuple(loss.shape)} {loss.mean().item():.4f}")
    if call + 1 == args.calls:
        break
