"""../shared/peers/torch_peer.py with Hugging Face's gradient checkpointing
on: each decoder layer's forward runs again in the backward, what a PyTorch
user turns on where sharc compiles `--recompute full`. Same arguments and
the same PEER= line as torch_peer.py; the path of torch_peer.py comes first.

  python3 torch-peer-recompute.py PATH/torch_peer.py dense 8 2048 4 compile
"""
import runpy
import sys

import transformers

peer = sys.argv[1]
model_class = transformers.Qwen3ForCausalLM
plain_init = model_class.__init__


def init_with_checkpointing(self, *args, **kwargs):
    plain_init(self, *args, **kwargs)
    self.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False})
    print("torch-peer-recompute: gradient checkpointing",
          "on" if self.is_gradient_checkpointing else "OFF", flush=True)


model_class.__init__ = init_with_checkpointing
sys.argv = [peer] + sys.argv[2:]
runpy.run_path(peer, run_name="__main__")
