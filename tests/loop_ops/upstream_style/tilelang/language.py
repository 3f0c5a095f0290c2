"""Stand-in for tilelang.language: decorators and annotations that do nothing."""


def prim_func(fn):
    return fn


def Tensor(*args, **kwargs):
    return None
