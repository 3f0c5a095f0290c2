"""Stand-in for tilelang.language: the decorator and annotation a prim_func needs at import."""


def prim_func(fn):
    return fn


def Tensor(*args, **kwargs):
    return None


int32 = "int32"  # a scalar parameter's annotation
