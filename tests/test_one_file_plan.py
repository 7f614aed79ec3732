"""A file checked on its own is parsed only where it can matter (``prefilter.one_file_plan``):
which functions are kept, and that findings do not change (``test_fast_path_equivalence`` checks
the latter on whole corpora)."""

from __future__ import annotations

import textwrap

import pytest

from sync_lint.api import make_settings
from sync_lint.pipeline import lint_file, prefilter, runner

SETTINGS = make_settings()


def kept(text: str) -> set[str] | None:
    """Names of the functions and methods the plan keeps; None: the file is parsed whole."""
    text = textwrap.dedent(text)
    linter = runner.Linter(SETTINGS)
    scope = linter.scope_of([text])
    active = [rule for rule in scope.rules if prefilter.may_match(rule, text)]
    assert active, "no rule can report here: the test would check nothing"
    plan = prefilter.one_file_plan(active, text, scope.scout)
    if plan is None:
        return None
    return {plan.units[i].name for i in plan.functions() if plan.keep[i]}


BUILDER = """
    import torch


    class FlashMetadataBuilder:
        def __init__(self, device):
            self.device = device

        def build(self, common):
            lens = self._host_lens(common)
            return lens

        def _host_lens(self, common):
            return common.seq_lens.tolist()

        def describe(self):
            return "flash"


    def unrelated_helper(rows):
        return [r.cpu() for r in rows]
"""


def test_a_hot_method_and_what_it_calls_are_kept():
    assert kept(BUILDER) == {"__init__", "build", "_host_lens"}


def test_methods_are_units_below_a_class_docstring_indented_deeper():
    """The members' indent is the docstring's: its continuation lines, deeper, must not hide the
    methods (the class was one unit, and no method of it a hot scope to the plans)."""
    docstring = '    """Builds the metadata.\n            indented deeper: a list, a link.\n    """\n'
    text = BUILDER.replace("    class FlashMetadataBuilder:\n", "    class FlashMetadataBuilder:\n" + textwrap.indent(docstring, "    "))
    assert "indented deeper" in text
    assert kept(text) == {"__init__", "build", "_host_lens"}


def test_the_state_method_of_a_base_class_in_the_file_is_kept():
    """A subclass inherits the places ``Base.__init__`` gives its attributes (``analysis.device``)."""
    text = """
        import torch


        class Base:
            def __init__(self, n):
                self.ready = torch.ones(n, dtype=torch.bool, device="cuda")

            def unrelated(self):
                return 1


        class FooMetadataBuilder(
            Base,
        ):
            def build(self, x):
                if self.ready.any():
                    return x
                return x + 1
    """
    assert kept(text) == {"__init__", "build"}


def test_a_hot_class_under_a_module_level_if_parses_the_file_whole():
    """Its methods are module-level code (always parsed), but what they call is not: the plan
    cannot say which functions matter."""
    text = """
        import torch

        HAS_FLASH = True


        def host_lens(t):
            torch.cuda.synchronize()
            return t


        def unrelated(t):
            return t


        if HAS_FLASH:

            class FlashMetadataBuilder:
                def build(self, common):
                    return host_lens(common.seq_lens)
    """
    assert kept(text) is None


WRAPPERS = """
    import torch


    def checked(x):
        assert x.is_contiguous()
        return torch.empty_like(x)


    def user(t):
        return checked(t[:, 0])


    def user_of_user(t):
        return user(t.T)


    def unrelated(t):
        sizes = list[int]()
        return t.view(-1, 4).sum(), sizes


    def mentions_triton_only(backend):
        return backend == "triton"
"""


def test_a_sink_and_its_callers_are_kept_not_look_alikes():
    """``list[int]()`` and ``x.view(-1, 4)`` have a sink's syntax but are none; the word
    ``triton`` outside a kernel's decorator makes no kernel."""
    assert kept(WRAPPERS) == {"checked", "user", "user_of_user"}


def test_a_triton_kernel_is_kept_by_its_decorator():
    text = """
        import triton
        import triton.language as tl


        @triton.jit
        def copy_kernel(src, dst, n):
            pass


        def launch(x, y):
            copy_kernel[(1,)](x[:, 0], y, 4)


        def other(x):
            return x.view(-1, 2)
    """
    assert kept(text) == {"copy_kernel", "launch"}


def test_a_sink_bound_at_module_level_keeps_its_users():
    text = """
        import torch

        reshape_and_cache = torch.ops._C_cache_ops.reshape_and_cache


        def store(key, cache):
            reshape_and_cache(key[:, 0], cache)


        def direct(x):
            torch.ops._C.rms_norm(x.t())


        def unrelated(x):
            return x.view(-1, 2)
    """
    assert kept(text) == {"store", "direct"}


def test_a_sink_in_module_level_code_that_binds_nothing_keeps_everything():
    text = """
        import torch

        torch.ops._C.warm_up(torch.empty(1))


        def direct(x):
            torch.ops._C.rms_norm(x.t())


        def unrelated(x):
            return x.view(-1, 2)
    """
    assert kept(text) is None


def test_a_sink_bound_under_a_module_level_block_keeps_its_users(monkeypatch):
    """``if hasattr(torch.ops._C, "op"):`` binds nothing by its test: what the block binds
    where the sink's words are (a function defined there, a container stored into, a name
    imported or assigned, in ``try`` and ``else`` too) gives the functions that read it the
    sink, and the rest can be masked."""
    text = """
        import torch

        QUANT_OPS = {}
        if hasattr(torch.ops._C, "rms_norm"):
            QUANT_OPS["rms"] = torch.ops._C.rms_norm

            def fused_norm(x):
                torch.ops._C.rms_norm(x)
        else:
            try:
                from vllm.ops import layer_norm as norm_op
            except ImportError:
                norm_op = torch.ops._C.layer_norm


        def by_table(x):
            QUANT_OPS["rms"](x.t())


        def by_wrapper(x):
            fused_norm(x[:, 0])


        def by_import(x):
            norm_op(x.t())


        def unrelated(x):
            return x.view(-1, 2)
    """
    assert kept(text) == {"by_table", "by_wrapper", "by_import"}
    from sync_lint.api import lint_text

    planned = [(d.line, d.code, d.message) for d in lint_text(textwrap.dedent(text))]
    monkeypatch.setattr(prefilter, "one_file_plan", lambda active, text, file_scout: None)
    assert planned == [(d.line, d.code, d.message) for d in lint_text(textwrap.dedent(text))]
    assert [line for line, _, _ in planned] == [22], planned  # through the wrapper defined in the block


def test_docstrings_and_class_attributes_holding_a_sinks_words_keep_only_their_readers(monkeypatch):
    """A docstring naming ``torch.ops`` binds and runs nothing, and a class attribute bound to
    a custom op is read by the methods that name it: neither makes every function matter."""
    text = """
        \"\"\"Forwards calls to ``torch.ops.fused``.\"\"\"
        import torch


        class Fusion:
            \"\"\"Keeps no ``data_ptr``.\"\"\"

            FUSED_OP = torch.ops._C.fused.default

            def apply(self, x):
                return self.FUSED_OP(x)

            def direct(self, x):
                torch.ops._C.rms_norm(x.t())

            def unrelated(self, x):
                return x.view(-1, 2)
    """
    assert kept(text) == {"apply", "direct"}
    from sync_lint.api import lint_text

    planned = [(d.line, d.code, d.message) for d in lint_text(textwrap.dedent(text))]
    monkeypatch.setattr(prefilter, "one_file_plan", lambda active, text, file_scout: None)
    assert planned == [(d.line, d.code, d.message) for d in lint_text(textwrap.dedent(text))]
    assert [line for line, _, _ in planned] == [15], planned


def test_a_class_header_holding_a_sinks_words_keeps_everything():
    text = """
        import torch


        class Fusion(make_base(torch.ops._C.fused)):
            def direct(self, x):
                torch.ops._C.rms_norm(x.t())

            def unrelated(self, x):
                return x.view(-1, 2)
    """
    assert kept(text) is None


def test_a_launch_under_a_module_level_block_keeps_its_callers(monkeypatch):
    """A launch in a function defined under ``if HAS_TRITON:`` is module code, always parsed:
    the functions that call it are seeds, as for a sink's words bound there, and the rest can
    be masked."""
    text = """
        import torch
        import triton
        import triton.language as tl

        if HAS_TRITON:

            @triton.jit
            def _copy_kernel(src_ptr, dst_ptr):
                offs = tl.arange(0, 128)
                tl.store(dst_ptr + offs, tl.load(src_ptr + offs))

            def copy_fast(src, dst):
                _copy_kernel[(1,)](src, dst)


        def by_wrapper(x, out):
            copy_fast(x.t(), out)


        def unrelated(x):
            return x.view(-1, 2)
    """
    assert kept(text) == {"by_wrapper"}
    from sync_lint.api import lint_text

    planned = [(d.line, d.code, d.message) for d in lint_text(textwrap.dedent(text))]
    monkeypatch.setattr(prefilter, "one_file_plan", lambda active, text, file_scout: None)
    assert planned == [(d.line, d.code, d.message) for d in lint_text(textwrap.dedent(text))]
    assert [line for line, _, _ in planned] == [18], planned


@pytest.mark.parametrize(
    "launch",
    [
        "_copy_kernel[(1,)](torch.empty(4).t(), torch.empty(4))",  # a plain statement of module code
        "class Outer:\n    class Inner:\n        def run(self, x):\n            _copy_kernel[(1,)](x.t(), x)",  # a nested class's method
    ],
)
def test_a_launch_in_other_module_code_keeps_everything(launch):
    text = "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n" \
        "def _copy_kernel(src_ptr, dst_ptr):\n    offs = tl.arange(0, 128)\n    tl.store(dst_ptr + offs, tl.load(src_ptr + offs))\n\n\n" \
        f"{launch}\n\n\ndef unrelated(x):\n    return x.view(-1, 2)\n"
    assert kept(text) is None


@pytest.mark.parametrize(
    "header",
    [
        "if register(torch.ops._C.rms_norm):",  # a call handed the op may bind anything
        "if (op := torch.ops._C.rms_norm) is not None:",  # a walrus binds
        "with torch.ops._C.lock() as op:",
        "for op in (torch.ops._C.rms_norm,):",
    ],
)
def test_a_block_whose_header_may_bind_a_sink_keeps_everything(header):
    text = f"""
        import torch

        {header}
            pass


        def direct(x):
            torch.ops._C.rms_norm(x.t())


        def unrelated(x):
            return x.view(-1, 2)
    """
    assert kept(text) is None


def test_a_declared_block_keeps_what_the_block_calls_only():
    text = """
        from vllm.utils.gpu_sync_debug import gpu_sync_allowed


        def step(batch):
            with gpu_sync_allowed():
                lens = host_lens(batch)
            return shapes(batch), lens


        def host_lens(batch):
            return batch.seq_lens.tolist()


        def shapes(batch):
            return batch.shape
    """
    assert kept(text) == {"step", "host_lens"}


def test_hot_functions_option_keeps_everything():
    text = textwrap.dedent(BUILDER)
    settings = make_settings(hot_functions=["*.unrelated_helper"])
    linter = runner.Linter(settings)
    scope = linter.scope_of([text])
    active = [rule for rule in scope.rules if prefilter.may_match(rule, text)]
    assert prefilter.one_file_plan(active, text, scope.scout) is None


def test_a_finding_that_rests_on_another_file_is_dropped_without_a_second_parse(monkeypatch, tmp_path):
    """A builder calling a helper of another module: the conditional finding can never be
    reported in a run of this file alone, so the masked parse is the only parse."""
    path = tmp_path / "builder.py"
    path.write_text(textwrap.dedent("""
        from vllm.v1.attention.backends.utils import split_decodes


        class FlashMetadataBuilder:
            def build(self, common):
                if common.num_prefills:
                    return None
                return split_decodes(common)

            def describe(self):
                return "flash".upper()
    """))
    parses = _parses(monkeypatch)
    assert runner.Linter(SETTINGS).run([str(path)], jobs=1).diagnostics == []
    assert len(parses) == 1 and "describe" not in parses[0]


def test_a_builder_with_no_sync_site_of_its_own_is_not_parsed_alone(monkeypatch, tmp_path):
    """Its only possible sync is in another file's helper, whose summary a run of this file alone
    does not have: the scout says no, and nothing is parsed."""
    path = tmp_path / "builder.py"
    path.write_text(textwrap.dedent("""
        from vllm.v1.attention.backends.utils import split_decodes


        class FlashMetadataBuilder:
            def build(self, common):
                return split_decodes(common, common.seq_lens.shape[0])
    """))
    parses = _parses(monkeypatch)
    assert runner.Linter(SETTINGS).run([str(path)], jobs=1).diagnostics == []
    assert parses == []


def test_a_masked_file_with_a_finding_is_reported_from_the_whole_file(tmp_path):
    path = tmp_path / "builder.py"
    path.write_text(textwrap.dedent(BUILDER).replace("return common.seq_lens.tolist()", "return common.seq_lens.tolist()  # x"))
    whole = runner.Linter(SETTINGS)
    found = [(d.line, d.code) for d in whole.run([str(path)], jobs=1).diagnostics]
    assert found == [(10, "GPU201")]


def _parses(monkeypatch) -> list[str]:
    parses: list[str] = []
    original = lint_file._parse_and_check
    monkeypatch.setattr(
        lint_file, "_parse_and_check", lambda source, text, *a, **k: parses.append(text) or original(source, text, *a, **k)
    )
    return parses


def test_a_masked_file_whose_findings_are_all_suppressed_is_parsed_once(monkeypatch, tmp_path):
    """Masking keeps the lines of what it keeps, so suppressed findings (which get no fix) are
    judged on the masked parse: the noqa counts as used, and there is no second parse."""
    path = tmp_path / "builder.py"
    path.write_text(textwrap.dedent(BUILDER).replace("lens = self._host_lens(common)", "lens = self._host_lens(common)  # noqa: GPU201"))
    parses = _parses(monkeypatch)
    assert runner.Linter(SETTINGS).run([str(path)], jobs=1).diagnostics == []
    assert len(parses) == 1 and "unrelated_helper" not in parses[0]


def test_a_call_of_a_local_helper_that_needs_nothing_is_parsed_once(monkeypatch, tmp_path):
    """A conditional finding on a function of this file whose summary gives no reason (it
    syncs nothing: its test reads no tensor) is no finding: no second parse for it."""
    path = tmp_path / "builder.py"
    path.write_text(
        textwrap.dedent(BUILDER).replace("return common.seq_lens.tolist()", "return common.seq_lens if common.use_cascade else None")
    )
    parses = _parses(monkeypatch)
    assert runner.Linter(SETTINGS).run([str(path)], jobs=1).diagnostics == []
    assert len(parses) == 1
