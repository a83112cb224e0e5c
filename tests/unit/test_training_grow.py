"""Growing a trained model by fresh layers (train.py --grow-layers): it starts as the model it grew
from, its old layers keep their weights in order, and only the fresh layers can be trained alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import mlx.core as mx
import mlx.optimizers as optim
import pytest
from mlx import nn
from mlx.utils import tree_flatten

from tests.support.random_model import tiny_qwen3
from training.tiny_chat.train import TrainConfig, grow_model, grown_indices, make_optimizer


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 3-layer qwen3's weights on disk, as an init model folder holds them."""
    mx.random.seed(3)
    model = tiny_qwen3()
    out = tmp_path_factory.mktemp("init")
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out


def _loaded(path: Path) -> nn.Module:
    model = tiny_qwen3()
    model.load_weights(str(path / "model.safetensors"))
    return model


TOKENS = mx.array([[1, 7, 3, 30, 12, 5, 9, 2]])


@pytest.mark.parametrize("new", [[3], [0], [1, 3]])
def test_a_grown_model_computes_what_it_grew_from(small: Path, new: list[int]) -> None:
    grown = tiny_qwen3(num_hidden_layers=3 + len(new))
    grow_model(grown, small, new)
    assert float(mx.abs(grown(TOKENS) - _loaded(small)(TOKENS)).max()) == 0.0


def test_the_old_layers_keep_their_weights_in_order_around_the_new(small: Path) -> None:
    old = _loaded(small)
    grown = tiny_qwen3(num_hidden_layers=5)
    grow_model(grown, small, [1, 3])
    for o, g in ((0, 0), (1, 2), (2, 4)):
        w_old = old.model.layers[o].self_attn.q_proj.weight
        assert mx.array_equal(grown.model.layers[g].self_attn.q_proj.weight, w_old)
    for g in (1, 3):
        layer = grown.model.layers[g]
        assert not mx.any(layer.self_attn.o_proj.weight) and not mx.any(layer.mlp.down_proj.weight)
        assert mx.any(layer.self_attn.q_proj.weight)  # fresh, not zero: it can learn
    assert mx.array_equal(grown.model.embed_tokens.weight, old.model.embed_tokens.weight)


def test_a_fresh_layer_learns_while_the_others_stay_frozen(small: Path) -> None:
    grown = tiny_qwen3(num_hidden_layers=4)
    grow_model(grown, small, [3])
    before = dict(tree_flatten(grown.parameters()))
    grown.freeze()
    grown.model.layers[3].unfreeze()

    def loss(model: nn.Module) -> mx.array:
        logits = model(TOKENS[:, :-1])
        return nn.losses.cross_entropy(logits, TOKENS[:, 1:]).mean()

    optimizer = optim.SGD(learning_rate=0.5)
    for _ in range(3):
        _, grads = nn.value_and_grad(grown, loss)(grown)
        optimizer.update(grown, grads)
    after = dict(tree_flatten(grown.parameters()))
    moved = {k for k in before if not mx.array_equal(before[k], after[k])}
    assert moved and all(k.startswith("model.layers.3.") for k in moved)
    assert "model.layers.3.self_attn.o_proj.weight" in moved


def test_the_indices_must_lie_in_the_grown_model() -> None:
    assert grown_indices("3, 1", 5) == [1, 3]
    for bad in ("", "5", "-1"):
        with pytest.raises(ValueError):
            grown_indices(bad, 5)


def test_the_init_model_must_have_the_layers_growing_expects(small: Path) -> None:
    with pytest.raises(ValueError, match="3 layers; growing needs 4"):
        grow_model(tiny_qwen3(num_hidden_layers=5), small, [2])


def test_the_fresh_layers_get_their_own_lr(small: Path) -> None:
    """With --new-layer-lr, one AdamW holds exactly the grown layer's weights, at that peak."""
    grown = tiny_qwen3(num_hidden_layers=4)
    grow_model(grown, small, [3])
    cfg = TrainConfig(layers=4, grow_layers="3", lr=1e-4, new_layer_lr=1e-3, warmup=1)
    optimizer = make_optimizer(cfg, lambda step: mx.array(cfg.lr))
    fresh, rest = optimizer._split_dictionary(grown.trainable_parameters())
    fresh_keys = {k for k, _ in tree_flatten(fresh)}
    assert fresh_keys and all(k.startswith("model.layers.3.") for k in fresh_keys)
    assert not any(k.startswith("model.layers.3.") for k, _ in tree_flatten(rest))
    assert float(optimizer.optimizers[0].learning_rate) == pytest.approx(1e-3)
    assert float(optimizer.optimizers[1].learning_rate) == pytest.approx(1e-4)
    plain = make_optimizer(replace(cfg, new_layer_lr=0.0), lambda step: mx.array(cfg.lr))
    assert isinstance(plain, optim.AdamW)
