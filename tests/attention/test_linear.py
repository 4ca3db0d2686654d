"""attnlab's Linear (attention/linear.py) against ``F.linear`` and a float64 recomputation: the
same values in and out of ``torch.inference_mode``, its packed weight reused while the weight is
unchanged and made again when it changes, and nothing of it kept by training, ``.to`` or a copy."""

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.attention import linear as linear_module
from attnlab.attention.linear import Linear, packing_available

PACKS = packing_available(torch.float32)
needs_packing = pytest.mark.skipif(not PACKS, reason="this torch build has no oneDNN inner product")


def _layer(bias: bool = True, dtype: torch.dtype = torch.float32, size: int = 24) -> Linear:
    torch.manual_seed(0)
    return Linear(size, size + 16, bias=bias).to(dtype)


def _big(**kw) -> Linear:
    """A float32 weight of 512 × 528 > 2^18: packed even for one row."""
    return _layer(size=512, **kw)


def test_it_is_an_nn_linear_with_the_same_parameters():
    layer = _layer()
    assert isinstance(layer, nn.Linear)
    assert list(layer.state_dict()) == ["weight", "bias"] == list(nn.Linear(24, 40).state_dict())


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 24), (2, 5, 24), (1, 1, 24)])
def test_under_inference_mode_it_equals_the_float64_product(bias, shape):
    layer = _layer(bias)
    x = torch.randn(shape)
    w, b = layer.weight.double(), None if layer.bias is None else layer.bias.double()
    expected = F.linear(x.double(), w, b)
    with torch.inference_mode():
        out = layer(x)
    assert out.dtype == torch.float32 and out.shape == (*shape[:-1], 40)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))  # outside: F.linear itself


def test_in_bfloat16_it_equals_the_float64_product_to_bfloat16s_precision():
    layer = _layer(dtype=torch.bfloat16)
    x = torch.randn(4, 24).bfloat16()
    expected = F.linear(x.double(), layer.weight.double(), layer.bias.double())
    with torch.inference_mode():
        out = layer(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double(), expected, atol=0.05, rtol=0.02)


def test_a_non_contiguous_input_gives_the_same_values():
    layer, x = _layer(), torch.randn(24, 6).t()  # (6, 24), transposed
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), F.linear(x.contiguous(), layer.weight, layer.bias))


@needs_packing
def test_the_packed_weight_is_made_once_and_reused():
    layer, x = _big(), torch.randn(2, 512)
    assert layer._packed is None
    with torch.inference_mode():
        layer(x)
        packed = layer._packed[-1]
        layer(x)
        assert layer._packed[-1] is packed


@needs_packing
@pytest.mark.parametrize("change", ["optimizer", "copy", "load_state_dict", "assign"])
def test_a_changed_weight_is_packed_again(change):
    layer, x = _big(), torch.randn(2, 512)
    with torch.inference_mode():
        before = layer(x)
    if change == "optimizer":
        layer(x).sum().backward()
        torch.optim.SGD(layer.parameters(), lr=1.0).step()
    elif change == "copy":
        with torch.no_grad():
            layer.weight.copy_(torch.randn(528, 512))
    elif change == "load_state_dict":
        layer.load_state_dict({"weight": torch.randn(528, 512), "bias": torch.randn(528)})
    else:
        layer.weight = nn.Parameter(torch.randn(528, 512))
    with torch.inference_mode():
        after = layer(x)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)


@needs_packing
def test_training_to_and_copies_keep_no_packed_weight():
    layer, x = _big(), torch.randn(2, 512)
    with torch.inference_mode():
        layer(x)
    assert layer._packed is not None
    clone = copy.deepcopy(layer)
    assert clone._packed is None and torch.equal(clone.weight, layer.weight)
    assert pickle.loads(pickle.dumps(layer))._packed is None and layer._packed is not None
    layer(x)  # a call outside inference mode: training, evaluation under no_grad
    assert layer._packed is None
    with torch.inference_mode():
        layer(x)
    layer.double()
    assert layer._packed is None
    with torch.inference_mode():  # float64: no packed kernel, F.linear
        torch.testing.assert_close(layer(x.double()), F.linear(x.double(), layer.weight, layer.bias))
    assert layer._packed is None


def test_without_onednn_it_is_f_linear(monkeypatch):
    monkeypatch.setattr(linear_module, "packing_available", lambda dtype: False)
    layer, x = _layer(), torch.randn(3, 24)
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    assert layer._packed is None


def test_parameters_made_under_inference_mode_are_not_packed():
    with torch.inference_mode():
        layer = Linear(24, 40)
        x = torch.randn(2, 24)
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    assert layer._packed is None


@needs_packing
@pytest.mark.parametrize(("dtype", "size", "rows", "packed"), [
    (torch.float32, 24, 1, False), (torch.float32, 24, 64, False), (torch.float32, 256, 1, False),
    (torch.float32, 256, 8, True), (torch.float32, 512, 1, True), (torch.bfloat16, 24, 1, False),
    (torch.bfloat16, 24, 8, True), (torch.bfloat16, 128, 1, True),
])
def test_small_float32_weights_keep_f_linear_where_it_is_faster(dtype, size, rows, packed):
    """float32: packed from 2^18 weights, or 2^16 at 8 rows and more; bfloat16: from 2^14, or 8 rows."""
    if dtype == torch.bfloat16 and not packing_available(dtype):
        pytest.skip("no oneDNN bfloat16 inner product here")
    layer, x = _layer(size=size, dtype=dtype), torch.randn(rows, size).to(dtype)
    with torch.inference_mode():
        out = layer(x)
    assert (layer._packed is not None) is packed
    tol = 0.05 if dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(out.double(), F.linear(x.double(), layer.weight.double(), layer.bias.double()),
                               atol=tol, rtol=tol)


@needs_packing
@pytest.mark.parametrize(("m", "k", "n"), [(16, 256, 320), (300, 512, 160)])
def test_prepack_product_and_gemm_equal_the_float64_product(m, k, n):
    """The recurrence's products (the LSTMN's window): ``product`` through ``prepack`` and
    ``gemm`` (a transposed view as the left factor, as a weight gradient takes it)."""
    torch.manual_seed(0)
    x, weight, a = torch.randn(m, k), torch.randn(n, k), torch.randn(k, m).t()
    packed = linear_module.prepack(weight, x)
    assert packed is not None  # 8 rows or more and n · k >= 2^16 weights
    expected = (x.double() @ weight.double().t()).float()
    torch.testing.assert_close(linear_module.product(x, weight, packed), expected, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(linear_module.gemm(a, weight.t()), (a.double() @ weight.double().t()).float(),
                               atol=1e-4, rtol=1e-5)


def test_prepack_declines_where_the_plain_product_is_faster_and_product_then_is_f_linear():
    x, small = torch.randn(16, 8), torch.randn(8, 8)
    assert linear_module.prepack(small, x) is None  # 64 weights: F.linear
    assert linear_module.prepack(small.double(), x.double()) is None  # float64: no packed product
    torch.testing.assert_close(linear_module.product(x, small, None), F.linear(x, small), rtol=0, atol=0)
    torch.testing.assert_close(linear_module.gemm(x, small), x @ small, rtol=0, atol=0)
