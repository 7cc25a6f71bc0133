"""The functions every repro carries a copy of: torch only, no annotations, no pt2kit.

The repro writer (:mod:`minifier.repro.writer`) copies the source of the ones a repro needs
into it with ``inspect.getsource``, so a repro runs with plain torch; pt2kit's own
queries use the same functions, so what the minifier asks is what the user runs.
"""

import torch


def graph_module(module):
    """A higher-order op takes its body as a torch.fx.GraphModule: trace one from the body's code.

    A call that makes a tensor from no tensor at all (``torch.ones(10)``, ``torch.tensor([0, 2])``
    in a branch) stays a call, as dynamo recorded it: traced as usual it would run once and
    become a constant of the body, which the op then returns as an alias of its own state (and
    dynamo refuses a body that does), and which a compiler lowers otherwise than the call. (An
    aot graph's body holds its constants as attributes, registered from the repro's data.) A call
    written ``call_opaque(fn, ...)`` is recorded as a call to ``fn``, not run: FX would run it.
    """

    class BodyTracer(torch.fx.Tracer):
        def getattr(self, attr, attr_val, parameter_proxy_cache):
            if isinstance(attr_val, torch.fx.GraphModule):  # a nested body stays a module attribute
                return self.create_proxy("get_attr", attr, (), {})
            return super().getattr(attr, attr_val, parameter_proxy_cache)

    tracer = BodyTracer(autowrap_functions=(call_hop,))

    def reads_tensors(value):
        if isinstance(value, (list, tuple)):
            return any(reads_tensors(v) for v in value)
        if isinstance(value, dict):
            return any(reads_tensors(v) for v in value.values())
        return isinstance(value, (torch.fx.Proxy, torch.Tensor))

    class Calls(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if isinstance(result, torch.Tensor) and not reads_tensors((args, kwargs)):  # made from no tensor
                return tracer.create_proxy("call_function", func, args, kwargs)
            return result

    def record(fn, *args, **kwargs):  # call_opaque while tracing: the call as dynamo recorded it, never run
        return tracer.create_proxy("call_function", fn, args, kwargs)

    names = type(module).forward.__globals__
    missing = object()
    opaque = names.get("call_opaque", missing)
    names["call_opaque"] = record
    try:
        with Calls():
            graph = tracer.trace(module)
    finally:
        if opaque is missing:
            del names["call_opaque"]
        else:
            names["call_opaque"] = opaque
    return torch.fx.GraphModule(module, graph)


def call_opaque(fn, *args, **kwargs):
    """Call ``fn``, which FX's tracing would run rather than record (:func:`graph_module` records it)."""
    return fn(*args, **kwargs)


def call_hop(name, *args, **kwargs):
    """Call the higher-order op ``torch.ops.higher_order.<name>`` (FX records this call in a body)."""
    return getattr(torch.ops.higher_order, name)(*args, **kwargs)


def clone_input(t):
    """A fresh copy of a saved input, strides and all (a graph may write into its inputs).

    A dense input is a tensor of its own, as the program's was (AOTAutograd treats a
    view that a graph writes into differently); an overlapping one (``expand``) is a
    view of the memory its strides reach; one saved with a larger storage around it
    (the program passed a slice of a tensor the graph never saw) is a view at the same
    offset into a copy of that storage.
    """
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    size = t.untyped_storage().nbytes() // t.element_size() if span else 0
    if t.storage_offset() or size > span:
        memory = torch.empty(size, dtype=t.dtype, device=t.device)
        memory.copy_(t.detach().as_strided((size,), (1,), 0))
        return memory.as_strided(t.shape, t.stride(), t.storage_offset())
    copy = t.as_strided((span,), (1,)).clone().as_strided(t.shape, t.stride())
    return copy.clone() if span == t.numel() else copy


def copies(values):
    """Ordinary copies of the tensors among ``values`` (a ZeroTensor or a conjugate view becomes its values)."""
    return [clone_input(v) if isinstance(v, torch.Tensor) else v for v in values]


def drop_unread_items(gm):
    """Erase the unread items of a tuple (a higher-order op's outputs) from a graph ``make_fx`` traced again.

    ``make_fx`` takes every output of a higher-order op out of its tuple, read or not;
    AOTAutograd's graph took only those it reads, and a lowering may make no more than
    those (Inductor's ``flex_attention`` on the CPU returns no log-sum-exp it was not asked for).
    """
    import operator

    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is operator.getitem and not node.users:
            gm.graph.erase_node(node)  # (an item nothing reads is dead code: taking it has no effect)
    gm.recompile()
    return gm


def non_leaf(t):
    """``t`` as a non-leaf that requires grad, the way the program passed it (as torch's repros do)."""
    with torch.enable_grad():
        return t.requires_grad_().clone(memory_format=torch.preserve_format)


def guarded_view(t, how, function=None):
    """``t`` as the view the program passed, one autograd guards against in-place writes: returned
    as-is by a custom ``autograd.Function`` named ``function`` (``"custom_function"``), made under
    ``no_grad`` (``"no_grad"``), or one of several outputs of one op (``"multi_output"``)."""
    if how == "custom_function":
        returned_as_is = type(
            function or "ReturnedAsIs",
            (torch.autograd.Function,),
            {"forward": staticmethod(lambda ctx, x: x), "backward": staticmethod(lambda ctx, grad: grad)},
        )
        return returned_as_is.apply(t)
    if how == "no_grad":
        with torch.no_grad():
            return t.view_as(t)
    return t.unsqueeze(0).unbind(0)[0]


def rand_tensor(shape, stride, dtype, requires_grad=False, seed=0, low=None, high=None, device="cpu", storage=None, distinct=False, ordered=False):
    """A seeded random tensor with exactly this shape, stride, dtype and requires_grad.

    Floats are standard normal; integers stay within the real data's [low, high]
    (so index tensors stay valid), and with ``distinct`` never repeat, as the real ones did not (an index
    without repeats: ``index_put`` of repeated indices is undefined), and with ``ordered`` run from ``low`` up
    to ``high`` (a jagged tensor's offsets, 1-d); bools are fair coins. The result is a
    leaf. With ``storage`` (offset, size), it is a view at that offset into a random storage of that size.
    """
    generator = torch.Generator().manual_seed(seed)
    numel = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(n > 0 for n in shape) else 0
    offset, numel = (0, numel) if storage is None else storage
    if dtype.is_floating_point or dtype.is_complex:
        base = torch.randn(numel, generator=generator, dtype=dtype)
    elif dtype == torch.bool:
        base = torch.randint(0, 2, (numel,), generator=generator).bool()
    else:
        lo = 0 if low is None else int(low)
        hi = lo if high is None else int(high)
        if distinct and hi - lo + 1 >= numel:
            base = (torch.randperm(hi - lo + 1, generator=generator)[:numel] + lo).to(dtype)
        else:
            base = torch.randint(lo, hi + 1, (numel,), generator=generator, dtype=dtype)
        if ordered and numel > 1:
            base = base.sort().values
            base[0], base[-1] = lo, hi
    made = base.to(device).as_strided(shape, stride, offset)
    made = made.clone() if numel == made.numel() and storage is None else made  # a dense one is a tensor of its own, not a view
    return made.detach().requires_grad_(requires_grad)
