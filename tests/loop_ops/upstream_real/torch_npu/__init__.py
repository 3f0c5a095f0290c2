"""Stand-in for torch_npu: importing it is all vec_add_1d.py does (tilelang/__init__.py gives torch its `.npu()`)."""
