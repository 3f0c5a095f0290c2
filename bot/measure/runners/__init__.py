"""Programs run in the sandboxed child (`python -m bot.measure.runners.<name>`).

They import only the standard library at module level: a runner must not pay
for (or depend on) torch unless the kernel itself does.
"""
