"""The programs tests run: a small model compiled with a planted backend, and one ``minify run`` of a script."""

from pathlib import Path

# The model's function, 15 nodes: the program model_script writes, and the function
# tests/minifier/test_reduce_inprocess.py saves graphs from.
MODEL_FUNCTION = '''
def f(x, w):
    y = x @ w
    y = torch.sin(y) * 2 + 1
    y = y.exp().log1p()
    y = torch.cos(y)
    y = y - y.mean(dim=-1, keepdim=True)
    y = torch.tanh(y) * 0.5
    y = y.sigmoid() + y.abs()
    return y.sum(dim=0)
'''

# State outside the graph, written between a forward and its backward: a hook closes over a global tensor the program
# updates after seeing the loss, which AOTAutograd saved for the backward (autograd's version check raises).
WRITTEN_BETWEEN = '''
import torch

scale = torch.ones(())


def forward(x, w):
    h = x @ w
    h.register_hook(lambda g: g * scale)
    return h.tanh().sum()


if __name__ == "__main__":
    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    loss = torch.compile(forward, backend="aot_eager")(x, w)
    scale.fill_(0.5)  # a loss scale decided after seeing the loss
    loss.backward()
'''

MODEL = '''
import sys
sys.path.insert(0, {tests!r})
import torch
import planted  # noqa: F401  registers the planted backends

{function}

if __name__ == "__main__":
    torch.manual_seed(0)
    x, w = torch.randn(8, 16) * {scale}, torch.randn(16, 16, requires_grad={train})
    out = torch.compile(f, backend={backend!r})(x, w)
    {after}
'''


def minified(in_process, script: Path, **options) -> dict:
    """``minify run --json``'s report of ``script`` (``options``: ``minify_script``'s): the program under capture in
    its own process, the queries asked in ``in_process``'s (tests/minifier/test_minifier_cli.py keeps the command's
    own processes)."""
    import json

    from minifier.minification import minify_script

    session, _ = in_process
    result = minify_script(session, script, [], out=script.parent / "runs", **options)
    return json.loads(json.dumps(result.to_json(), default=str))  # as the command prints it
