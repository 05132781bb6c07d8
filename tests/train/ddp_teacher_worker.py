"""Run under torchrun: trains a tiny teacher for a few steps with the shared Trainer and saves
this rank's final weights to OUT/rank<r>.safetensors."""

import sys

import torch
from safetensors.torch import save_file

from alaya.diffusion.flow import flow_matching_loss, logit_normal_t
from alaya.models.teacher import Teacher, TeacherConfig
from alaya.train.loop import TrainConfig, Trainer

out = sys.argv[1]
torch.manual_seed(0)
cfg = TeacherConfig(latent_channels=4, gbuffer_channels=8, text_dim=6, widths=(8, 8), blocks=1, emb_dim=8)
model = Teacher(cfg)


def loss_fn(m, index):
    g = torch.Generator().manual_seed(index)
    x = torch.randn(2, 3, 4, 4, 4, generator=g)
    gb = torch.randn(2, 3, 8, 4, 4, generator=g)
    text = torch.randn(2, 6, generator=g)
    t = logit_normal_t(2, g)
    eps = torch.randn(x.shape, generator=g)
    loss = flow_matching_loss(lambda z, t: m(z, t, gb, text), x, t, eps)
    return loss, {}


trainer = Trainer(model, TrainConfig(run_dir=f"{out}/run", steps=4, lr=1e-2, warmup=1, log_every=1,
                                     ckpt_every=2, progress=False, ema=0.9), loss_fn)
trainer.run()
rank = trainer.dist.rank
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, f"{out}/rank{rank}.safetensors")
