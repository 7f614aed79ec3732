"""Reference kernels and a runtime GPU-sync checker.

The subpackages are imported explicitly (``reference_kernels.kda.ops``,
``reference_kernels.mla.ops``) so that importing the checker alone does not pull in
Triton: the Triton interpreter has to be selected (``TRITON_INTERPRET=1``) before any
kernel module is imported.
"""
