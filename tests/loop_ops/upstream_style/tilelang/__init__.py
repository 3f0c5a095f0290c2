"""Stand-in for the tilelang package: just enough for attn.py to build on a CPU."""


def jit(*args, **kwargs):
    def wrap(fn):
        return fn

    return wrap
