# A Transformers BERT for sequence classification, pipelined over 4 IPUs the way Optimum Graphcore's pipelined
# models annotate it: poptorch.BeginBlock on the embeddings, on each encoder layer and on the classifier output.
# A small configuration, built from scratch: nothing is downloaded.
import argparse

import torch
import transformers

import poptorch

parser = argparse.ArgumentParser()
parser.add_argument("--layers-per-ipu", type=int, nargs="+", default=[1, 1, 1, 1])
parser.add_argument("--sequence-length", type=int, default=64)
parser.add_argument("--steps", type=int, default=2)
args = parser.parse_args()

config = transformers.BertConfig(vocab_size=1024, hidden_size=128, num_hidden_layers=sum(args.layers_per_ipu),
                                 num_attention_heads=2, intermediate_size=512, max_position_embeddings=128,
                                 num_labels=3)
torch.manual_seed(0)


class PipelinedBertForSequenceClassification(transformers.BertForSequenceClassification):
    def parallelize(self, layers_per_ipu):
        layer_ipu = [ipu for ipu, n in enumerate(layers_per_ipu) for _ in range(n)]
        self.bert.embeddings = poptorch.BeginBlock(self.bert.embeddings, "Embedding", ipu_id=0)
        for index, layer in enumerate(self.bert.encoder.layer):
            self.bert.encoder.layer[index] = poptorch.BeginBlock(layer, f"Encoder{index}", ipu_id=layer_ipu[index])
        last_ipu = len(layers_per_ipu) - 1
        self.bert.pooler = poptorch.BeginBlock(self.bert.pooler, "Classifier Output", ipu_id=last_ipu)
        return self

    def forward(self, input_ids, attention_mask, token_type_ids, labels):
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                               labels=labels, return_dict=False)


model = PipelinedBertForSequenceClassification(config).parallelize(args.layers_per_ipu).train()

opts = poptorch.Options()
opts.deviceIterations(2)
opts.Training.gradientAccumulation(16)
opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.SameAsIpu))

micro_batch_size, seq = 4, args.sequence_length
samples = micro_batch_size * 2 * 16 * args.steps
data = torch.utils.data.TensorDataset(
    torch.randint(0, config.vocab_size, (samples, seq)),
    torch.ones(samples, seq, dtype=torch.long),
    torch.zeros(samples, seq, dtype=torch.long),
    torch.randint(0, config.num_labels, (samples,)))
loader = poptorch.DataLoader(opts, data, batch_size=micro_batch_size)
optimizer = poptorch.optim.AdamW(model.parameters(), lr=1e-4)
training_model = poptorch.trainingModel(model, opts, optimizer=optimizer)
for step, (input_ids, attention_mask, token_type_ids, labels) in enumerate(loader):
    loss, logits = training_model(input_ids, attention_mask, token_type_ids, labels)
    print(f"step {step}: loss {loss.item():.4f}")
