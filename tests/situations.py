"""The situations the property tests draw: one strategy, narrowed by each test to what it states."""

from hypothesis import strategies as st

from advisor import Cluster, Model, Training

GPUS = ("A100-40GB", "A100-80GB", "H100-SXM-80GB", "H200", "B200", "MI300X")
DENSE = ("llama-2-7b", "llama-2-13b", "llama-3-8b", "llama-3-70b", "llama-2-70b", "qwen2.5-7b", "qwen2.5-72b",
         "gpt-3-175b")
MODELS = ("llama-2-7b", "llama-2-13b", "llama-3-8b", "llama-3-70b", "mixtral-8x7b", "qwen2.5-7b", "gpt-3-175b")


@st.composite
def situations(draw, models=MODELS, gpus=GPUS, sizes=(1, 2, 4, 8, 16, 32, 64, 128, 256),
               seqs=(2048, 4096, 8192, 32768), batches=(256, 512, 1024, 2048)):
    """(Cluster, Model, Training) of a preset GPU and model, a GPU count, a sequence length and a
    global batch, each drawn from the given choices."""
    cluster = Cluster(gpu=draw(st.sampled_from(gpus)), gpus=draw(st.sampled_from(sizes)))
    model = Model.preset(draw(st.sampled_from(models)))
    return cluster, model, Training(seq_len=draw(st.sampled_from(seqs)), global_batch_size=draw(st.sampled_from(batches)))
