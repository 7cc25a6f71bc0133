"""`multilabel_margin_loss`'s decomposition ignores the -1 that ends a row's labels: a wrong loss.

Each row of the target lists label indices and ends at the first -1 (documented). Eager stops
there; the decomposition AOTAutograd applies counts the labels after the -1 too, so the
compiled loss is 1.87 where eager gives 0.76, from aot_eager on. Found by a fresh-bug hunt.

Upstream: https://github.com/pytorch/pytorch/issues/141017 (and #185464)
"""
import torch
import torch.nn.functional as F

CASE = {
    "upstream": "pytorch/pytorch#141017",
    "kind": "accuracy",
    "stage": "aot_eager",
    "ops": ["aten.multilabel_margin_loss_forward"],
    "exception": "AssertionError",
    "fails_on_2_15": False,
    "notes": "the decomposition does not stop each row's labels at the first -1",
}

torch.manual_seed(0)
head = torch.nn.Linear(6, 4)


def loss_fn(x, labels):
    return F.multilabel_margin_loss(head(x).sigmoid(), labels)


x = torch.randn(3, 6)
labels = torch.tensor([[3, 0, -1, 1], [2, -1, 0, 0], [1, 2, 3, -1]])
with torch.no_grad():
    expected = loss_fn(x, labels)
    actual = torch.compile(loss_fn)(x, labels)
torch.testing.assert_close(actual, expected)
