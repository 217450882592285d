"""Process-level services every layer may use; nothing here knows about tools or rankings.

    logs.py           quiet the libraries' DEBUG/INFO loggers
    progress.py       progress bars only on a terminal
    cpus.py           the CPUs this process may use, and their split between worker processes
    compile_cache.py  the persistent cache of XLA's compiled programs
    memory.py         the memory budget (`DEFAULT_MEMORY_BUDGET`) stages size their chunks from
    heap.py           freed heap pages handed back to the OS after a stage or a tuning step

Why at the bottom: these are side conditions of a run, and results never depend on them.
"""
