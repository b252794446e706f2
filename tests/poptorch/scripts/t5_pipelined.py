# A Transformers T5 for summarization, pipelined the way Optimum Graphcore's PipelinedT5ForConditionalGeneration
# annotates it: one lookup of the encoder's and the decoder's tokens in the shared embedding on IPU 0 (its
# SharedEmbedding), poptorch.BeginBlock on each encoder layer, then on each decoder layer (one layers_per_ipu list
# over both), the LM head and loss on the last IPU. A small configuration, built from scratch: nothing is downloaded.
import argparse

import torch
import transformers

import poptorch

parser = argparse.ArgumentParser()
parser.add_argument("--layers-per-ipu", type=int, nargs="+", default=[0, 2, 2, 2])
parser.add_argument("--encoder-layers", type=int, default=3)
parser.add_argument("--steps", type=int, default=2)
args = parser.parse_args()

layers = sum(args.layers_per_ipu)
config = transformers.T5Config(vocab_size=1024, d_model=128, d_kv=32, d_ff=512, num_heads=4,
                               num_layers=args.encoder_layers, num_decoder_layers=layers - args.encoder_layers)
config._attn_implementation = "eager"  # Optimum Graphcore's T5 runs T5's own attention
torch.manual_seed(0)


class SharedEmbedding(torch.nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.shared = shared

    def forward(self, input_ids, decoder_input_ids):
        return self.shared(input_ids), self.shared(decoder_input_ids)


class PipelinedT5ForConditionalGeneration(transformers.T5ForConditionalGeneration):
    def parallelize(self, layers_per_ipu):
        layer_ipu = [ipu for ipu, n in enumerate(layers_per_ipu) for _ in range(n)]
        self.shared_embedding = poptorch.BeginBlock(SharedEmbedding(self.shared), "Embedding", ipu_id=0)
        for index, layer in enumerate(self.encoder.block):
            self.encoder.block[index] = poptorch.BeginBlock(layer, f"Encoder{index}", ipu_id=layer_ipu[index])
        shift = len(self.encoder.block)
        for index, layer in enumerate(self.decoder.block):
            self.decoder.block[index] = poptorch.BeginBlock(layer, f"Decoder{index}",
                                                            ipu_id=layer_ipu[index + shift])
        self.lm_head = poptorch.BeginBlock(self.lm_head, "LM Head Output", ipu_id=len(layers_per_ipu) - 1)
        return self

    def forward(self, input_ids, attention_mask, decoder_input_ids, labels):
        embeds, decoder_embeds = self.shared_embedding(input_ids, decoder_input_ids)
        return super().forward(inputs_embeds=embeds, attention_mask=attention_mask,
                               decoder_inputs_embeds=decoder_embeds, labels=labels, use_cache=False,
                               return_dict=False)


model = PipelinedT5ForConditionalGeneration(config).parallelize(args.layers_per_ipu).train()

opts = poptorch.Options()
opts.Training.gradientAccumulation(16)
opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.SameAsIpu))

micro_batch_size, seq, target = 4, 64, 32
samples = micro_batch_size * 16 * args.steps
data = torch.utils.data.TensorDataset(
    torch.randint(0, config.vocab_size, (samples, seq)),
    torch.ones(samples, seq, dtype=torch.long),
    torch.randint(0, config.vocab_size, (samples, target)),
    torch.randint(0, config.vocab_size, (samples, target)))
loader = poptorch.DataLoader(opts, data, batch_size=micro_batch_size)
optimizer = poptorch.optim.AdamW(model.parameters(), lr=1e-4)
training_model = poptorch.trainingModel(model, opts, optimizer=optimizer)
for step, (input_ids, attention_mask, decoder_input_ids, labels) in enumerate(loader):
    loss, logits = training_model(input_ids, attention_mask, decoder_input_ids, labels)
    print(f"step {step}: loss {loss.item():.4f}")
