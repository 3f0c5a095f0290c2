"""A fake `mindiesd` for the model-loop tests: an older API than the features table describes
(no `sparse_attention`; `attention_forward` without `fused`), so a pipeline using the table's
API fails at run time with a real ImportError / TypeError raised by CPython."""


def attention_forward(query, key, value, attn_mask=None, scale=None):
    return query
