"""tf.train: tinyflow's optimizers, building update graphs of assigns over the objective's
variables (placeholders are not variables)."""
from __future__ import annotations

from typing import Optional, Sequence

from ..graph.symbol import Symbol, create
from ._ops import sqrt, zeros, zeros_like
from .variables import Variable, gradients, group


def _variables(obj: Symbol, var_list: Optional[Sequence[Symbol]]) -> list[Symbol]:
    return list(var_list) if var_list is not None else obj.list_input_variables()


class GradientDescentOptimizer:
    """var <- var - learning_rate * grad, for every variable of the objective."""

    def __init__(self, learning_rate: float, name: str = "GradientDescent") -> None:
        self.learning_rate = learning_rate
        self.name = name

    def minimize(self, obj: Symbol, var_list: Optional[Sequence[Symbol]] = None) -> Symbol:
        variables = _variables(obj, var_list)
        grads = gradients(obj, variables)
        return group(*[create("assign", v, v + (-self.learning_rate) * g) for v, g in zip(variables, grads)])


class AdamOptimizer:
    """Adam with tinyflow's defaults (epsilon 1e-4): moments m, v and the step count t are
    variables initialised by initialize_all_variables()."""

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-04, name: str = "Adam") -> None:
        self.name = name
        self.t = Variable(zeros(shape=[1]), name + "_t")
        self.learning_rate, self.beta1, self.beta2, self.epsilon = learning_rate, beta1, beta2, epsilon
        self.m: list[Symbol] = []
        self.v: list[Symbol] = []

    def minimize(self, obj: Symbol, var_list: Optional[Sequence[Symbol]] = None) -> Symbol:
        variables = _variables(obj, var_list)
        grads = gradients(obj, variables)
        first = len(self.m)
        for i, v in enumerate(variables, start=first):
            self.m.append(Variable(zeros_like(v), f"{self.name}_m{i}"))
            self.v.append(Variable(zeros_like(v), f"{self.name}_v{i}"))
        t = create("assign", self.t, self.t + 1)
        lr_t = self.learning_rate * (sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t))
        updates = []
        for var, g, m, v in zip(variables, grads, self.m[first:], self.v[first:]):
            m_t = create("assign", m, self.beta1 * m + (1 - self.beta1) * g)
            v_t = create("assign", v, self.beta2 * v + (1 - self.beta2) * g * g)
            updates.append(create("assign", var, var - lr_t * m_t / (sqrt(v_t) + self.epsilon)))
        return group(*updates)
