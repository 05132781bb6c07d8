"""Memory self-rollout: a training sample whose memory and context hold the model's own frames.

In play the memory's holes are filled by the frames the model generates (``WorldSession``: render,
generate, insert where the memory did not cover), and its context is those frames. The rolling
renders of ``alaya.train.world_memory`` hold only true frames, so the model never learns what
its own insertions look like, nor to repair them. Here (``memory_rollout``: up to L frames):

* frame m = n - L starts as a normal sample does: the true context m-K ... m-1 and a memory
  holding the rolling render at frame m's camera (the true frames 0 ... m-1 as that view saw
  them, inserted as one frame);
* frames m ... n-1 are generated without gradient, exactly as a session plays them (the play
  steps' sampler, the play noise level 0, ``stabilize``), at the recorded cameras; each is pushed
  into the context and inserted into the memory as play inserts it (``generated_insert``);
* every render the network sees is filled as play's (``shown_render``: its pinholes, and its
  disocclusions where the model's config asks);
* frame n, the trained one, is then the usual target (true RGB-D, gate "the memory is right
  here"), given the memory and context the rollout left.

Costs L batched network passes and, per sample, L + 1 memory renders and inserts.
"""

from __future__ import annotations

import numpy as np
import torch

from alaya.models.memory_conditioning import (as_context, generated_insert, memory_latent, session_memory,
                                              shown_render, to_image)
from alaya.models.scene_memory import SceneMemory
from alaya.models.student import push_context
from alaya.train.world_data import LatentEpisodes, action_rows, draw_frames, frame_pitch
from alaya.train.world_memory import MemoryEpisodes


def render_batch(memories: list[SceneMemory], K: torch.Tensor, views: torch.Tensor, H: int, W: int):
    """Each memory rendered at its camera: rgb (B, 3, H, W), coverage and depth (B, 1, H, W)."""
    views_ = [m.render(K[b], views[b], H, W) for b, m in enumerate(memories)]
    return tuple(torch.stack([getattr(v, f) for v in views_]) for f in ("rgb", "coverage", "depth"))



@torch.no_grad()
def rollout_batch(core, data: LatentEpisodes, mem: MemoryEpisodes, cfg, rng: np.random.Generator, e, st, style,
                  T: int, rollout: int):
    """``memory_batch``'s tuple for frames n = m + ``rollout`` of episodes ``e`` in styles ``st``,
    after the model played frames m ... n-1 (module docstring)."""
    m = cfg.model
    B, K = len(e), m.context
    n = draw_frames(data, rng, e, rollout + 1, T, cfg.action_focus, cfg.action_focus_span)
    first = n - rollout
    ctx, valid = mem.context(data, e, st, first, K)
    rgb0, cov0, depth0 = mem.renders.get(e, st, first)
    H, W = rgb0.shape[-2:]
    Ks, memories = mem.K[e], []
    for b in range(B):                                   # frame m's view of the true frames 0 ... m-1
        memory = session_memory(m)
        memory.insert(rgb0[b], depth0[b, 0] * cov0[b, 0], Ks[b], mem.views[e[b], first[b]], time=0)
        memories.append(memory)
    level = torch.full((B,), float(m.play_context_noise))
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    for j in range(rollout):
        f = first + j
        views = mem.views[e, f]
        mrgb, mcov, mdepth = render_batch(memories, Ks, views, H, W)
        memory = memory_latent(*shown_render(mrgb, mcov, mdepth, m))
        rows = action_rows(data, e, f, m.action_history)
        z = torch.randn(memory.shape, generator=gen)
        out = core.sample(z, memory, ctx, valid, style, rows, level, stabilize=True, pitch=frame_pitch(data, e, f))
        ctx, valid = push_context(ctx, valid, as_context(out))
        image = to_image(out)
        for b, memory_b in enumerate(memories):
            rgb_b, depth_b, replaced = generated_insert(image[b], Ks[b], views[b], mcov[b, 0], m.memory_floor_clamp,
                                                        m.memory_sky_depth, m.memory_replace_below,
                                                        m.memory_depth_median, m.memory_depth_outlier)
            memory_b.insert(rgb_b, depth_b, Ks[b], views[b], time=j + 1, see_through=replaced,
                            observed=False)                      # as play inserts a generated frame
    rows = action_rows(data, e, n, m.action_history)
    rgb, depth = mem.frame(data, e, st, n)
    renders = shown_render(*render_batch(memories, Ks, mem.views[e, n], H, W), m)
    return rgb, depth, ctx, valid, rows, style, renders, n
