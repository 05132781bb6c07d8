"""The teacher recipe trains end to end on a tiny dataset and saves a loadable model."""

import pytest
import torch

from alaya.codecs import Autoencoder, AutoencoderConfig
from alaya.models.teacher import Teacher, TeacherConfig
from alaya.train.loop import TrainConfig
from alaya.train.teacher import TeacherTrainConfig, train_teacher


def test_teacher_recipe(tiny_dataset, tmp_path):
    torch.manual_seed(0)
    Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))).save_pretrained(tmp_path / "ae")
    cfg = TeacherTrainConfig(
        data=str(tiny_dataset), autoencoder=str(tmp_path / "ae"), out=str(tmp_path / "teacher"), frames=2,
        teacher=TeacherConfig(latent_channels=4, gbuffer_channels=20, widths=(8, 8), blocks=1, emb_dim=8),
        train=TrainConfig(run_dir=str(tmp_path / "run"), steps=3, batch_size=2, log_every=1, val_every=3,
                          ckpt_every=3, progress=False, warmup=1))
    train_teacher(cfg)
    t = Teacher.from_pretrained(tmp_path / "teacher")
    assert t.config.latent_channels == 4
    assert "flow_loss" in (tmp_path / "teacher" / "config.json").read_text()


def test_training_times_put_a_share_at_exactly_one():
    import numpy as np

    from alaya.diffusion.flow import logit_normal_t
    from alaya.train.teacher import training_times
    plain = training_times(500, torch.Generator().manual_seed(3), np.random.default_rng(0))
    assert torch.equal(plain, logit_normal_t(500, torch.Generator().manual_seed(3)))
    assert (plain < 1).all()
    assert torch.equal(training_times(7, torch.Generator(), np.random.default_rng(0), t_one=1.0), torch.ones(7))
    t = training_times(4000, torch.Generator().manual_seed(3), np.random.default_rng(0), t_mean=0.5, t_one=0.3)
    ones = t == 1
    assert abs(float(ones.float().mean()) - 0.3) < 0.03
    assert torch.equal(t[~ones], logit_normal_t(4000, torch.Generator().manual_seed(3), mean=0.5)[~ones])


def test_prompt_augmentation_stays_near_the_style():
    import numpy as np

    from alaya.train.teacher import augment_prompt
    phr = torch.eye(8)[:3]                                  # three orthonormal "phrasings"
    e = augment_prompt(phr, np.random.default_rng(0), 0.0)
    assert torch.isclose(e.norm(), torch.tensor(1.0)) and torch.all(e[3:] == 0) and torch.all(e[:3] >= 0)
    for seed in range(20):
        e = augment_prompt(phr, np.random.default_rng(seed), 1.0)
        assert torch.isclose(e.norm(), torch.tensor(1.0))
        assert (e[:3] ** 2).sum() >= 0.5 - 1e-6            # noise norm <= 1 keeps >= 45 degrees
    a = augment_prompt(phr, np.random.default_rng(5), 1.0)
    assert torch.equal(a, augment_prompt(phr, np.random.default_rng(5), 1.0))


def test_presets():
    import pytest

    from alaya.models.teacher import teacher_config
    assert teacher_config("small").widths == (96, 128)
    assert teacher_config("tiny", blocks=2).blocks == 2
    with pytest.raises(ValueError, match="preset"):
        teacher_config("huge")


def test_latent_channel_weights_follow_the_decoder_gain():
    from alaya.train.teacher import latent_channel_weights
    ae = Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8)))
    with torch.no_grad():
        ae.decode_linear[0].weight.zero_()
        ae.decode_linear[0].weight[0, :, 0, 0] = torch.tensor([2.0, 1.0, 1.0, 0.0])
    w = latent_channel_weights(ae, 1.0)
    assert torch.allclose(w, torch.tensor([4.0, 1.0, 1.0, 0.0]) / 1.5)
    assert torch.allclose(latent_channel_weights(ae, 0.0), torch.ones(4))
    assert abs(float(latent_channel_weights(ae, 0.5).mean()) - 1.0) < 1e-6


def test_init_keeps_or_resets_the_output_layer(tiny_dataset, tmp_path):
    """``init_keep_output`` continues a released teacher as it is; the default resets the output
    layer (a velocity-predicting init). lr 0: the saved weights are the initial ones."""
    torch.manual_seed(0)
    Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))).save_pretrained(tmp_path / "ae")
    tc = TeacherConfig(latent_channels=4, gbuffer_channels=20, widths=(8, 8), blocks=1, emb_dim=8)
    released = Teacher(tc)
    with torch.no_grad():
        released.out.weight.normal_()
        released.out.bias.fill_(0.5)
    released.save_pretrained(tmp_path / "released")
    for keep in (True, False):
        out = tmp_path / f"out_{keep}"
        train_teacher(TeacherTrainConfig(
            data=str(tiny_dataset), autoencoder=str(tmp_path / "ae"), out=str(out), frames=2, teacher=tc,
            init=str(tmp_path / "released" / "model.safetensors"), init_keep_output=keep,
            train=TrainConfig(run_dir=str(tmp_path / f"run_{keep}"), steps=1, batch_size=2, lr=0.0,
                              val_every=1, ckpt_every=1, progress=False, warmup=1)))
        t = Teacher.from_pretrained(out)
        assert torch.equal(t.stem.weight, released.stem.weight)
        assert torch.equal(t.out.bias, released.out.bias) == keep
        assert keep or not t.out.weight.any()


def test_view_teacher_continues_a_plain_one(tiny_dataset, tmp_path):
    """``view=True`` adds the branch (zero at the start) to a teacher trained without it, and the
    clips' cameras reach it: with lr 0 the weights are the init's, the branch is still zero."""
    torch.manual_seed(0)
    Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))).save_pretrained(tmp_path / "ae")
    tc = TeacherConfig(latent_channels=4, gbuffer_channels=20, widths=(8, 8), blocks=1, emb_dim=8)
    Teacher(tc).save_pretrained(tmp_path / "plain")
    for lr, out in ((0.0, "same"), (1e-2, "moved")):
        train_teacher(TeacherTrainConfig(
            data=str(tiny_dataset), autoencoder=str(tmp_path / "ae"), out=str(tmp_path / out), frames=2,
            teacher=tc, view=True, view_dropout=0.5,
            init=str(tmp_path / "plain" / "model.safetensors"), init_keep_output=True,
            train=TrainConfig(run_dir=str(tmp_path / f"run_{out}"), steps=2, batch_size=2, lr=lr,
                              val_every=2, ckpt_every=2, progress=False, warmup=1)))
    same, moved = Teacher.from_pretrained(tmp_path / "same"), Teacher.from_pretrained(tmp_path / "moved")
    assert same.config.view_channels == 8 and not same.view[-1].weight.any()
    assert moved.view[-1].weight.any()          # gradients reached the branch through the cameras


def test_camera_teacher_grows_into_a_pixel_gbuffer_one(tiny_dataset, tmp_path):
    """``view_gbuffer`` (the raw G-buffer after the camera) and ``view_pixel`` widen the view
    input; continuing a camera-only teacher, the old inputs keep their weights, the new ones
    start at zero (lr 0: nothing else changes), and with training they come alive."""
    torch.manual_seed(0)
    Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))).save_pretrained(tmp_path / "ae")
    tc = TeacherConfig(latent_channels=4, gbuffer_channels=20, widths=(8, 8), blocks=1, emb_dim=8,
                       view_channels=8)
    cam = Teacher(tc)
    with torch.no_grad():
        cam.view[1].weight.normal_(0, 0.1)      # a trained camera branch
        cam.view[3].weight.normal_(0, 0.1)
    cam.save_pretrained(tmp_path / "camera")
    for lr, out in ((0.0, "same"), (1e-2, "moved")):
        train_teacher(TeacherTrainConfig(
            data=str(tiny_dataset), autoencoder=str(tmp_path / "ae"), out=str(tmp_path / out), frames=2,
            teacher=tc, view=True, view_gbuffer=True, view_pixel=4, view_dropout=0.5,
            init=str(tmp_path / "camera" / "model.safetensors"), init_keep_output=True,
            train=TrainConfig(run_dir=str(tmp_path / f"run_{out}"), steps=2, batch_size=2, lr=lr,
                              val_every=2, ckpt_every=2, progress=False, warmup=1)))
    same, moved = Teacher.from_pretrained(tmp_path / "same"), Teacher.from_pretrained(tmp_path / "moved")
    assert same.config.view_channels == 17 and same.config.view_pixel == 4
    w = same.view[1].weight
    assert w.shape[1] == 64 * (17 + 4)
    assert torch.equal(w[:, :64 * 8], cam.view[1].weight) and not w[:, 64 * 8:].any()
    assert moved.view[1].weight[:, 64 * 8:].any()


def test_an_init_that_cannot_grow_is_named():
    from alaya.train.teacher import grow_view_input
    own = {"view.1.weight": torch.zeros(8, 64, 1, 1)}
    with pytest.raises(ValueError, match="view.1.weight"):
        grow_view_input({"view.1.weight": torch.zeros(8, 128, 1, 1)}, own)
    assert grow_view_input({"view.1.weight": torch.ones(8, 32, 1, 1)}, own)["view.1.weight"][:, 32:].sum() == 0
