"""Text the GPU1xx rule pages share. Free of libcst, like the rule classes, which a run that
parses nothing still imports."""

# The fix-safety clause of GPU101, GPU102 and GPU103 (``_sink_findings.sink_finding`` decides it).
CONTIGUOUS_FIX_SAFETY = (
    "Safe only where the sink is a Triton kernel that loads through that argument and neither stores through it "
    "nor hands it to another function, called directly or through wrappers (in any checked file) that do nothing "
    "else with it than read its shape, strides or dtype and hand it on. Elsewhere (a custom op, a kernel or "
    "wrapper whose code is not checked, `.view(dtype)`, a raw `.data_ptr()`) unsafe: the callee may write through "
    "the argument (a custom op's `out`), and the writes would go to the copy. Where the kernel, or a function the "
    "argument is passed on to, is known to store through it (a Triton `tl.store` or atomic), no fix is offered and "
    "the message says so: the copy would certainly lose the writes; unless a function on the way returns the "
    "argument, whose caller may read the writes from the result (the fix stays, unsafe)."
)

# What GPU101 and GPU102 tell to do (``_sink_findings.sink_finding``).
ADD_CONTIGUOUS = "Add `.contiguous()`."
