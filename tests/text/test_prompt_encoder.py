import pytest
import torch

from alaya.text import PromptEncoder


@pytest.fixture(scope="module")
def enc():
    return PromptEncoder()


def test_embeddings_are_unit_and_semantic(enc):
    e = enc.encode(["a foggy morning", "thick mist at dawn", "a neon-lit cyberpunk night"])
    assert e.shape == (3, 384) and e.dtype == torch.float32
    assert torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-4)
    assert e[0] @ e[1] > e[0] @ e[2], "paraphrases are closer than different looks"


def test_cache_and_empty_prompt(enc, tmp_path):
    a = enc.encode("golden sunset")
    assert torch.equal(enc.encode("  golden sunset "), a)
    assert torch.count_nonzero(enc.encode("")) == 0
    cached = PromptEncoder(cache_file=tmp_path / "cache.safetensors")
    cached.encode(["snowy winter"])
    cached.save_cache()
    again = PromptEncoder(cache_file=tmp_path / "cache.safetensors")
    again._load = None     # must not need the model for a cached prompt
    assert torch.allclose(again.encode("snowy winter"), enc.encode("snowy winter"), atol=1e-6)


def test_bad_prompts(enc):
    with pytest.raises(TypeError, match="string"):
        enc.encode([3])
    with pytest.raises(ValueError, match="limit"):
        enc.encode("x" * 5000)


def test_cache_stays_bounded():
    import torch

    from alaya.text import PromptEncoder
    enc = PromptEncoder(max_cached=3, known=False)           # "a foggy morning" is a shipped prompt
    first = enc.encode("a foggy morning")
    for i in range(6):
        enc.encode(f"prompt number {i}")
    assert len(enc._cache) == 3
    assert torch.allclose(enc.encode("a foggy morning"), first, atol=1e-6)   # recomputed, same vector


def test_the_environment_names_a_cache_that_needs_no_model(enc, tmp_path, monkeypatch):
    path = tmp_path / "prompts.safetensors"
    writer = PromptEncoder(cache_file=path)
    writer.encode(["a toon-shaded cartoon"])
    writer.save_cache()
    monkeypatch.setenv("ALAYA_PROMPT_CACHE", str(path))
    reader = PromptEncoder()
    assert reader.cache_file == path
    reader._load = None     # a machine without the model package
    assert torch.allclose(reader.encode("a toon-shaded cartoon"), enc.encode("a toon-shaded cartoon"), atol=1e-6)


def test_the_projects_own_prompts_ship_with_their_embeddings(enc, monkeypatch):
    """``known_prompts.safetensors`` holds exactly the known prompts (a phrasing added without
    rewriting it fails here: ``python -m alaya.prompts``), the model still gives the stored
    vectors, and encoding them needs no model."""
    from alaya.text.encoder import _known_embeddings, prompt_key
    from alaya.prompts import known_prompts
    prompts = known_prompts()
    table = _known_embeddings()
    assert set(table) == {prompt_key(p) for p in prompts}
    sample = [prompts[0], prompts[len(prompts) // 2], prompts[-1]]
    monkeypatch.delenv("ALAYA_PROMPT_CACHE", raising=False)          # the model itself
    fresh = PromptEncoder(known=False).encode(sample)
    assert torch.allclose(torch.stack([table[prompt_key(p)] for p in sample]), fresh, atol=1e-5)
    offline = PromptEncoder()
    offline._load = None                                   # no model: known prompts only
    assert torch.allclose(offline.encode(sample), fresh, atol=1e-5)
    with pytest.raises(TypeError):
        offline.encode("a prompt nobody has written before")


def test_many_threads_encode_while_the_cache_evicts():
    """Server threads encode at once; a small cache evicts all the time; nothing is lost or raised."""
    import concurrent.futures
    enc = PromptEncoder(max_cached=2, known=False)
    prompts = [f"prompt number {i}" for i in range(6)]
    expected = {p: enc.encode(p) for p in prompts}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: (prompts[i % 6], enc.encode(prompts[i % 6])), range(60)))
    for p, e in results:
        assert torch.allclose(e, expected[p], atol=1e-5), p
    assert len(enc._cache) <= 2
