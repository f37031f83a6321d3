"""Small ops registered by the graph core tests (names t_*), independent of the op library.
Their gradients are written here from first principles."""
from __future__ import annotations

from luabridge.graph import LuaCompute, NNCompute, Op, PythonCompute, Symbol, create
from luabridge.graph import registry as R


def _same(attrs, ins, outs=None):
    known = next((s for s in list(ins) + list(outs or []) if s is not None), None)
    for s in ins:
        if s is not None and known is not None and s != known:
            raise ValueError(f"inconsistent shapes {s} and {known}")
    return [known] * len(ins), [known]


def _s(e) -> Symbol:
    return Symbol([e])


def _mm_shape(attrs, ins):
    a, b = ins
    if a is not None and b is not None and a[1] != b[0]:
        raise ValueError(f"matmul of {a} and {b}")
    return ins, [None if a is None or b is None else (a[0], b[1])]


def _linear_shape(attrs, ins):
    x = ins[0]
    nh = int(attrs["num_hidden"])
    if x is None:
        return ins, [None]
    return [x, (nh, x[1]), (nh,)], [(x[0], nh)]


def _transpose(e):
    return create("t_transpose", _s(e)).outputs[0]


def register_all() -> None:
    if not R.has("placeholder"):
        R.register(Op("placeholder", num_inputs=0, input_names=(),
                      infer_shape=lambda a, i: (i, [R.parse_tuple(a["shape"]) if a.get("shape") else None])))
    R.register(Op("t_add", num_inputs=2, input_names=("lhs", "rhs"), infer_shape=_same, inplace=[(0, 0)],
                  compute=LuaCompute("function(x, y) return function() y[1]:add(x[1], x[2]) end end"),
                  gradient=lambda n, g: [g[0], g[0]]))
    R.register(Op("t_mul", num_inputs=2, input_names=("lhs", "rhs"), infer_shape=_same,
                  compute=LuaCompute("function(x, y) return function() y[1]:cmul(x[1], x[2]) end end"),
                  gradient=lambda n, g: [create("t_mul", _s(g[0]), _s(n.inputs[1])).outputs[0],
                                         create("t_mul", _s(g[0]), _s(n.inputs[0])).outputs[0]]))
    R.register(Op("t_exp", infer_shape=_same, inplace=[(0, 0)],
                  compute=LuaCompute("function(x, y) return function() y[1]:exp(x[1]) end end"),
                  gradient=lambda n, g: [create("t_mul", _s(g[0]), _s(Entry0(n))).outputs[0]]))
    R.register(Op("t_tanhc", infer_shape=_same, inplace=[(0, 0)],
                  compute=LuaCompute("function(x, y) return function() y[1]:tanh(x[1]) end end"),
                  gradient=lambda n, g: [create("t_tanh_grad", _s(g[0]), _s(Entry0(n))).outputs[0]]))
    R.register(Op("t_tanh_grad", num_inputs=2, input_names=("grad", "out"), infer_shape=_same,
                  inplace=[(0, 0)],
                  compute=LuaCompute("function(x, y) local t = x[2].new() return function() "
                                     "t:resizeAs(x[2]):copy(x[2]):cmul(x[2]):mul(-1):add(1); "
                                     "y[1]:cmul(x[1], t) end end")))
    R.register(Op("t_transpose", infer_shape=lambda a, i: (i, [None if i[0] is None else i[0][::-1]]),
                  compute=LuaCompute("function(x, y) return function() y[1]:copy(x[1]:t()) end end"),
                  gradient=lambda n, g: [_transpose(g[0])]))
    R.register(Op("t_matmul", num_inputs=2, input_names=("lhs", "rhs"), infer_shape=_mm_shape,
                  compute=LuaCompute("function(x, y) return function() y[1]:mm(x[1], x[2]) end end"),
                  gradient=lambda n, g: [
                      create("t_matmul", _s(g[0]), _s(_transpose(n.inputs[1]))).outputs[0],
                      create("t_matmul", _s(_transpose(n.inputs[0])), _s(g[0])).outputs[0]]))
    R.register(Op("t_sum", infer_shape=lambda a, i: (i, [(1,)]),
                  compute=LuaCompute("function(x, y) return function() y[1]:fill(x[1]:sum()) end end"),
                  gradient=lambda n, g: [create("t_broadcast", _s(g[0]), _s(n.inputs[0])).outputs[0]]))
    R.register(Op("t_broadcast", num_inputs=2, input_names=("scalar", "like"),
                  infer_shape=lambda a, i: ([(1,), i[1]], [i[1]]),
                  compute=LuaCompute("function(x, y) return function() y[1]:fill(x[1][1]) end end")))
    R.register(Op("t_fail", infer_shape=_same,
                  compute=LuaCompute("function(x, y) return function() error('t_fail: boom') end end")))
    R.register(Op("t_pyfail", infer_shape=_same,
                  compute=PythonCompute(lambda i, o, a: (_ for _ in ()).throw(RuntimeError("py boom")))))
    R.register(Op("t_assign", num_inputs=2, input_names=("ref", "value"), infer_shape=_same,
                  mutate_inputs=[0],
                  compute=LuaCompute("function(x, y) return function() x[1]:copy(x[2]); y[1]:copy(x[2]) end end")))
    R.register(Op("t_fill", num_inputs=0, input_names=(),
                  infer_shape=lambda a, i: (i, [R.parse_tuple(a["shape"])]),
                  compute=LuaCompute("function(x, y, kw) local v = tonumber(kw.value) "
                                     "return function() y[1]:fill(v) end end")))
    R.register(Op("t_linear", num_inputs=3, input_names=("data", "weight", "bias"),
                  infer_shape=_linear_shape,
                  compute=NNCompute("function(ishape, kw) return nn.Linear(ishape[1][2], tonumber(kw.num_hidden)) end")))
    R.register(Op("t_tanh", infer_shape=_same,
                  compute=NNCompute("function() return nn.Tanh() end")))
    R.register(Op("t_mse", num_inputs=2, input_names=("data", "target"),
                  infer_shape=lambda a, i: (i, [(1,)]),
                  compute=NNCompute("function() return nn.MSECriterion() end", criterion=True)))


def Entry0(n):
    from luabridge.graph import Entry
    return Entry(n, 0, 0)


def placeholder(name: str, dtype: str = "float64", **attrs) -> Symbol:
    return create("placeholder", name=name, dtype=dtype, **attrs)
