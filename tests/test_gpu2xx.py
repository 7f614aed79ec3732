"""GPU2xx (host-device syncs): device provenance, hot scopes, declarations, summaries, fixes."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from broken_files import BROKEN_KINDS, write_broken
from expectations import expected_in_text

from sync_lint import api
from sync_lint.api import fix_text, lint_paths, lint_text, make_settings
from sync_lint.pipeline.discover import DEFAULT_EXCLUDE, Discovery
from sync_lint.pipeline.runner import Linter

ROOT = Path(__file__).resolve().parent.parent
GUARD = "reference_kernels.sync_check:gpu_sync_allowed"
OPTIONS = {"preview": True, "sync_guard": GUARD}


def findings(source: str, **options) -> set[tuple[int, str]]:
    merged = {**OPTIONS, **options}
    return {(d.line, d.code) for d in lint_text(textwrap.dedent(source), **merged) if d.code.startswith("GPU2")}


def check(source: str, **options) -> None:
    """The GPU2xx findings of ``source`` are exactly its ``# expect:`` marks."""
    source = textwrap.dedent(source)
    expected = {(line, code) for line, code in expected_in_text(source) if code.startswith("GPU2")}
    assert findings(source, **options) == expected


def messages(source: str, **options) -> list[str]:
    merged = {**OPTIONS, **options}
    return [d.message for d in lint_text(textwrap.dedent(source), **merged) if d.code.startswith("GPU2")]


# -- device provenance --------------------------------------------------------------------------

def test_cpu_side_values_never_sync():
    check("""
        import numpy as np
        import torch

        class FooMetadataBuilder:
            def __init__(self, device):
                self.host_buf = torch.zeros(8, device="cpu")
                self.pinned = torch.empty(8, pin_memory=True)
                self.arr = np.zeros(8)
                self.dev = torch.zeros(8, device=device)
                self.via_kwargs = torch.zeros(8, **dict(device=device))

            def build(self, common, lens_host, positions_np):
                a = common.query_start_loc_cpu[-1].item()
                b = self.host_buf.tolist() + self.pinned.tolist() + self.arr.tolist()
                c = lens_host.tolist() + positions_np.tolist()
                d = torch.from_numpy(self.arr).tolist()
                e = torch.tensor([1, 2]).tolist()
                f = torch.zeros(3, device=torch.device("cpu")).item()
                g = common.seq_lens.cpu().tolist()  # expect: GPU201
                h = self.dev.tolist()  # expect: GPU201
                i = self.via_kwargs.tolist()  # expect: GPU201
                j = common.buffer.np[:4].tolist() + common.buffer.cpu[:4].tolist()
                k = common.buffer.gpu[:4].tolist()  # expect: GPU201
                return a, b, c, d, e, f, g, h, i, j, k
    """)


def test_shape_arithmetic_is_host_side():
    check("""
        import torch

        class M(torch.nn.Module):
            def forward(self, x: torch.Tensor):
                n = int(x.shape[0]) + x.size(0) + x.numel() + len(x) + x.dim()
                if x.shape[0] > 1 and x.numel():
                    return x[: x.size(0) // 2], range(x.shape[-1]), torch.arange(n, device=x.device)
                return x
    """)


def test_values_flow_through_assignments_branches_and_loops():
    check("""
        import torch

        class M(torch.nn.Module):
            def forward(self, x: torch.Tensor, flag: bool):
                y = None
                if flag:
                    y = x.cuda()
                z = y.sum()
                host = z.cpu()  # expect: GPU201
                for _ in range(2):
                    w = host.item()
                    host = x
                return w
    """)


def test_item_result_is_a_python_number():
    # `int(t.item())`: one explicit sync, not an implicit one as well.
    assert findings("""
        import torch

        class M(torch.nn.Module):
            def forward(self, x: torch.Tensor):
                return int(x.cuda()[-1].item())
    """) == {(6, "GPU201")}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("hot-classes", {(4, "GPU201")}), ("always", {(4, "GPU201"), (8, "GPU201")}), ("never", set())],
)
def test_unknown_device_option(policy, expected):
    source = """
        class FooMetadataBuilder:
            def build(self, common):
                return common.seq_lens.tolist()

        class Model(torch.nn.Module):
            def forward(self, x):
                return x.tolist()
    """
    assert findings("import torch\n" + textwrap.dedent(source), unknown_device=policy) == {
        (line + 1, code) for line, code in expected
    }


def test_unknown_python_values_are_not_implicit_syncs_even_in_builders():
    # `int(x)` / `if x:` of a value that may be a Python int stays silent; a certain tensor does not.
    check("""
        class FooMetadataBuilder:
            def build(self, common):
                n = int(common.max_query_len)
                if common.num_reqs and common.use_cascade:
                    pass
                lens = common.query_start_loc[1:] - common.query_start_loc[:-1]
                m = int(lens.max())  # expect: GPU202
                return n, m
    """)


# -- hot scopes ---------------------------------------------------------------------------------

def test_cold_functions_and_plain_functions_are_not_hot():
    check("""
        import torch

        class FooMetadataBuilder:
            def __init__(self):
                self.x = torch.ones(2, device="cuda")
                self.x.tolist()

            def build_for_cudagraph_capture(self, common):
                return self.x.tolist()  # expect: GPU201

            def profile_run(self):
                return self.x.tolist()

        class M(torch.nn.Module):
            def load_weights(self, w: torch.Tensor):
                return w.cuda().tolist()

            def _dummy_run(self):
                return torch.ones(2, device="cuda").tolist()

        def plain(x):
            return x.cuda().tolist()
    """)


def test_hot_scope_options():
    source = """
        import torch

        def step(x):
            return x.cuda().tolist()

        class Runner:
            def execute_model(self, x):
                return x.cuda().tolist()

            def forward(self, x):
                return x.cuda().tolist()
    """
    assert findings(source) == set()
    assert findings(source, hot_functions=["*.step"]) == {(5, "GPU201")}
    assert findings(source, hot_class_patterns=["Runner"], hot_method_patterns=["execute_*"]) == {(9, "GPU201")}
    assert findings(source, hot_functions=["*.step"], cold_function_patterns=["step"]) == set()


ENGINE_CLASSES = """
    import torch
    from vllm.v1.attention.backend import AttentionImpl
    from sglang.srt.layers.attention.base_attn_backend import AttentionBackend

    class FlashAttentionImpl(AttentionImpl):
        def __init__(self, scale):
            self.scale = scale.item()

        def forward(self, layer, query, output, attn_metadata):
            n = attn_metadata.seq_lens.max().item()  # expect: GPU201
            self._plan(attn_metadata.query_start_loc)  # expect: GPU201
            return output[:n]

        def _plan(self, query_start_loc):
            return query_start_loc.tolist()

        def _build_dense_impl(self, weights):
            return weights.sum().item()

        def do_kv_cache_update(self, layer, slot_mapping):
            return slot_mapping.max().item()

    class TritonMLAImpl:
        def forward_mqa(self, q, kv_cache, attn_metadata):
            return attn_metadata.block_table.tolist()  # expect: GPU201

    class CPUAttentionBackendImpl(AttentionImpl):
        def forward(self, layer, query, output, attn_metadata):
            return attn_metadata.seq_lens.tolist()

    class TritonAttnBackend(AttentionBackend):
        def init_forward_metadata(self, forward_batch):
            self.max_len = forward_batch.seq_lens.max().item()

        def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
            self.lens = forward_batch.seq_lens.cpu()

        def init_forward_metadata_in_graph(self, forward_batch):
            self.n = forward_batch.seq_lens.sum().item()  # expect: GPU201

        def _build_cuda_graph_forward_metadata(self, forward_batch):
            return forward_batch.extend_seq_lens.tolist()

        def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True):
            if forward_batch.seq_lens.max() > 4:  # expect: GPU202
                return q
            return v
"""


def test_engine_classes_hot_by_their_own_contract():
    # vLLM's attention implementations and SGLang's attention backends run every step, reached
    # from the model only through a custom op or a backend object. Their hot methods are their
    # own contract's (`hot-class-methods`), not crossed with the builders' `_build_*`: SGLang's
    # `init_forward_metadata_out_graph` (and the eager `init_forward_metadata`) hold the host
    # work by that contract. A receiver of unknown device counts there as in a metadata builder.
    check(ENGINE_CLASSES)


def test_hot_class_methods_option():
    assert findings(ENGINE_CLASSES, hot_class_methods={}) == set()
    only_sglang = {"*Backend": ["init_forward_metadata_out_graph"]}
    out_graph_sync = textwrap.dedent(ENGINE_CLASSES).splitlines().index("        self.lens = forward_batch.seq_lens.cpu()") + 1
    assert findings(ENGINE_CLASSES, hot_class_methods=only_sglang) == {(out_graph_sync, "GPU201")}
    runner = """
        class ModelRunner:
            def execute_model(self, batch):
                return batch.seq_lens.tolist()

            def load_model(self, batch):
                return batch.seq_lens.tolist()
    """
    assert findings(runner) == set()
    assert findings(runner, hot_class_methods={"*Runner": ["execute_*"]}) == {(4, "GPU201")}
    # ``extend-hot-class-methods`` keeps the engines' entries, and joins a glob's lists
    both = textwrap.dedent(ENGINE_CLASSES) + textwrap.dedent(runner)
    runner_sync = both.splitlines().index("        return batch.seq_lens.tolist()") + 1
    extend = {"*Runner": ["execute_*"], "*Backend": ["init_forward_metadata_out_graph"]}
    assert findings(both, extend_hot_class_methods=extend) == findings(ENGINE_CLASSES) | {
        (out_graph_sync, "GPU201"), (runner_sync, "GPU201"),
    }


def test_hot_class_by_base_and_module_by_same_file_base():
    check("""
        import torch
        from vllm.attention.backends.abstract import AttentionMetadataBuilder

        class Mine(AttentionMetadataBuilder):
            def build(self, common):
                return common.seq_lens.tolist()  # expect: GPU201

        class Base(torch.nn.Module):
            pass

        class Child(Base):
            def forward(self, x: torch.Tensor):
                return x.cuda().tolist()  # expect: GPU201

        class NotAModule:
            def forward(self, x: torch.Tensor):
                return x.cuda().tolist()
    """)


# -- declarations and debug regions -------------------------------------------------------------

def test_declaration_forms_and_custom_names():
    source = """
        from contextlib import nullcontext
        from mylib.sync import allow_sync, gpu_sync_allowed

        class FooMetadataBuilder:
            def build(self, common):
                with allow_sync():
                    a = common.seq_lens.tolist()
                with gpu_sync_allowed(first_only=True):
                    b = common.seq_lens.tolist()
                cm = gpu_sync_allowed() if common.check else nullcontext()
                with cm:
                    c = common.seq_lens.tolist()
                return a, b, c

            @gpu_sync_allowed()
            def build_for_cudagraph_capture(self, common):
                return common.seq_lens.tolist()
    """
    assert findings(source) == {(8, "GPU201")}
    assert findings(source, sync_declarations=["gpu_sync_allowed", "allow_sync"]) == set()
    only_dotted = {(10, "GPU201"), (13, "GPU201"), (18, "GPU201")}
    assert findings(source, sync_declarations=["mylib.sync.allow_sync"]) == only_dotted


def test_a_declaration_imported_under_another_name_declares():
    """``from debug import gpu_sync_allowed as allowed``: ``with allowed():`` declares the sync it
    holds (GPU201 silent), and one that holds none is stale (GPU203)."""
    source = """
        from mylib.debug import gpu_sync_allowed as allowed

        class FooMetadataBuilder:
            def build(self, common):
                with allowed():
                    lens = common.seq_lens.tolist()
                with allowed():
                    total = common.num_reqs + 1
                return lens, total
    """
    assert findings(source) == {(8, "GPU203")}
    # A name of its own is not the declaration's, whatever it is called.
    assert findings(source.replace("from mylib.debug import gpu_sync_allowed as allowed", "from mylib.debug import allowed")) == {
        (7, "GPU201")
    }


def test_debug_only_regions():
    check("""
        import logging

        from vllm import envs

        logger = logging.getLogger(__name__)

        class FooMetadataBuilder:
            def build(self, common):
                if envs.VLLM_DEBUG_METADATA:
                    print(common.seq_lens.tolist())
                if __debug__:
                    print(common.seq_lens.tolist())
                if self._debug and common.seq_lens.any():
                    pass
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("%s", common.seq_lens.tolist())
                if not self.debug:
                    pass
                else:
                    print(common.seq_lens.tolist())
                if common.verbose:
                    print(common.seq_lens.tolist())  # expect: GPU201
                # The arms of a conditional expression, as the branches of an `if`.
                longest = common.seq_lens.max().item() if envs.VLLM_DEBUG_METADATA else 0
                shown = 0 if not self.debug else common.seq_lens.tolist()
                lens = common.seq_lens.tolist() if not self.debug else 0  # expect: GPU201
                return longest, shown, lens
    """)


@pytest.mark.parametrize(("binding", "test", "off_path"), [
    ('_GATHER_CHECK = os.environ.get("SGLANG_GATHER_CHECK", "0") == "1"', "_GATHER_CHECK", True),
    ('_VALIDATE_TABLES = os.getenv("SGLANG_VALIDATE_TABLES") == "1"', "_VALIDATE_TABLES and idx.numel()", True),
    ('_SANITY = os.environ.get("SGLANG_SANITY", "false").lower() in ("1", "true")', "_SANITY", True),
    ('VERIFY_INDICES = get_bool_env_var("SGLANG_VERIFY_INDICES")', "VERIFY_INDICES", True),
    ('_CHECK_PAGES = bool(int(os.getenv("SGLANG_CHECK_PAGES", "0")))', "_CHECK_PAGES", True),
    # On unless switched off, a default not written here, a rebinding, or not named for a check.
    ('_BALANCE_CHECK = os.environ.get("SGLANG_BALANCE_CHECK", "1") == "1"', "_BALANCE_CHECK", False),
    ('_STRICT_CHECK = get_bool_env_var("SGLANG_STRICT_CHECK", "true")', "_STRICT_CHECK", False),
    ("_ENV_CHECK = envs.SGLANG_ENV_CHECK", "_ENV_CHECK", False),
    ('_FAST_GATHER = os.environ.get("SGLANG_FAST_GATHER", "0") == "1"', "_FAST_GATHER", False),
    ('_NO_CHECK = os.environ.get("SGLANG_NO_CHECK", "0") == "1"', "_NO_CHECK", False),
    (('_REBOUND_CHECK = os.environ.get("SGLANG_REBOUND_CHECK", "0") == "1"\n\n\n'
      "def enable_checks():\n    global _REBOUND_CHECK\n    _REBOUND_CHECK = True"), "_REBOUND_CHECK", False),
    (('_HIP_CHECK = os.environ.get("SGLANG_HIP_CHECK", "0") == "1"\n'
      "if torch.version.hip:\n    _HIP_CHECK = True"), "_HIP_CHECK", False),
    ('_OR_CHECK = os.environ.get("SGLANG_OR_CHECK", "0") == "1"\n_OR_CHECK |= envs.X', "_OR_CHECK", False),
    ('_TYPED_CHECK: bool\n_TYPED_CHECK = os.environ.get("SGLANG_TYPED_CHECK", "0") == "1"', "_TYPED_CHECK", True),
])  # fmt: skip
def test_checks_switched_on_from_the_environment_are_off_path(binding, test, off_path):
    # SGLang's `AiterAttnBackend`: `_GFX_ASM_CTX_GATHER_CHECK = os.environ.get(
    # "SGLANG_GFX_ASM_CTX_GATHER_CHECK", "0") == "1"`, then `torch.equal` under `if
    # _GFX_ASM_CTX_GATHER_CHECK:`, and as a conditional expression's test.
    name = re.match(r"\w+", binding).group()
    source = textwrap.dedent("""
        import os

        import torch

        from sglang.srt.environ import envs
        from sglang.srt.utils import get_bool_env_var

        {binding}


        class AiterAttnBackend:
            def forward_decode(self, q, ref, idx):
                if {test}:
                    assert torch.equal(ref, idx)
                if not {name}:
                    pass
                else:
                    assert torch.equal(ref, idx)
                checked = idx.tolist() if {name} else None
                return q, checked
    """).format(binding=binding, test=test, name=name)
    lines = source.splitlines()
    syncs = {(number, "GPU202") for number, line in enumerate(lines, 1) if "torch.equal" in line}
    syncs |= {(number, "GPU201") for number, line in enumerate(lines, 1) if "tolist" in line}
    assert len(syncs) == 3
    compile(source, "example.py", "exec")  # a source that does not parse would have no finding
    assert findings(source) == (set() if off_path else syncs)


def test_a_call_both_off_path_and_on_path_is_quoted_at_its_on_path_line():
    # SGLang `_asm_context_prefill_indices`: the gather helper is called under the opt-in check
    # and again in the `else` branch; the finding's reason quoted the first call's line.
    source = textwrap.dedent("""
        import os

        import torch

        _GATHER_CHECK = os.environ.get("X_GATHER_CHECK", "0") == "1"


        def gather(seq_lens):
            return seq_lens.sum().item()


        def indices(seq_lens, idx, total):
            if total > 0:
                if _GATHER_CHECK:
                    ref = gather(seq_lens)
                return idx
            return gather(seq_lens)


        class FooMetadataBuilder:
            def build(self, seq_lens, idx, total):
                lens = torch.zeros(4, device="cuda")
                return indices(lens, idx, total)
    """)
    (message,) = [d.message for d in lint_text(source, select=["GPU201"])]
    assert "calls `gather` (line 18)" in message, message


def test_a_second_walk_of_a_helper_quotes_lines_of_the_helper():
    # SGLang `resolve_precomputed_max_seqlen`: the walk with the caller's GPU tensor bound found the
    # sync's text from where the helper's first walk had stopped, past it: in a later function.
    source = textwrap.dedent("""
        import torch
        from torch import nn


        def resolve(cu_seqlens, max_seqlen):
            if max_seqlen is None:
                seq_lens = cu_seqlens[1:] - cu_seqlens[:-1]
                return int(seq_lens.max().item())
            if isinstance(max_seqlen, torch.Tensor):
                return int(max_seqlen.item())
            return max_seqlen


        class VisionAttention(nn.Module):
            def forward(self, q, cu_seqlens, max_seqlen=None):
                cu_seqlens_gpu = cu_seqlens.to(q.device)
                return resolve(cu_seqlens_gpu, max_seqlen)


        def longest(cu_seqlens):
            seq_lens = cu_seqlens[1:] - cu_seqlens[:-1]
            return seq_lens.max().item()
    """)
    (message,) = [d.message for d in lint_text(source, select=["GPU201"])]
    assert "syncs with `.item()` on `seq_lens.max()` (line 9)" in message, message


def test_training_only_regions():
    # vLLM and SGLang serve models in eval mode (their loaders return `model.eval()`), so a
    # branch that runs only while training (transformers' `DacResidualVectorQuantizer.forward`:
    # `if self.training: ... n_quantizers.to(device)`) is off the serving path, as a debug-only
    # one is. A test that training does not decide (`or`), or the `training` flag of something
    # other than the module itself, decides nothing.
    check("""
        import torch
        from torch import nn


        class Quantizer(nn.Module):
            def forward(self, x: torch.Tensor, lens_cpu: torch.Tensor) -> torch.Tensor:
                lens = lens_cpu.to(x.device)  # expect: GPU205
                if self.training:
                    drop = torch.randint(1, 8, (x.shape[0],)).to(x.device)
                    x = x * int(lens.max().item()) * drop
                if self.training and self.dropout > 0:
                    x = x * lens.sum().item()
                if not self.training:
                    x = x + 1
                else:
                    x = x - lens.min().item()
                if self.training or self.always_scale:
                    x = x * lens.max().item()  # expect: GPU201
                if self.config.training:
                    x = x * lens.min().item()  # expect: GPU201
                noise = lens.max().item() if self.training else 0
                scale = 1 if self.training else lens.max().item()  # expect: GPU201
                return x * noise * scale
    """)


def test_opt_in_diagnostic_flags_by_name():
    # The SGLang form (`srt/layers/logits_processor.py`): an environment field read with `.get()`,
    # whose name says tracing; and the other ways an engine spells an opt-in trace/profile switch.
    source = """
        import os

        import torch

        from sglang.srt.environ import envs
        from vllm import envs as vllm_envs

        VERBOSE = False

        class LogitsProcessor(torch.nn.Module):
            def forward(self, hidden_states, lm_head):
                if envs.SGLANG_TRACE_LOGITS_E2E_SYNC.get():
                    torch.cuda.synchronize()
                if envs.SGLANG_DEBUG_LOGITS.get():
                    torch.cuda.synchronize()
                if vllm_envs.VLLM_LOGITS_TRACE:
                    torch.cuda.synchronize()
                if envs.SGLANG_PROFILE_LM_HEAD.get() and hidden_states.numel() > 0:
                    torch.cuda.synchronize()
                if os.environ.get("SGLANG_LOGITS_VERBOSE"):
                    torch.cuda.synchronize()
                if self.enable_trace:
                    torch.cuda.synchronize()
                if self._profiling_enabled:
                    torch.cuda.synchronize()
                if VERBOSE:
                    torch.cuda.synchronize()
                if not envs.SGLANG_TRACE_LOGITS_E2E_SYNC.get():
                    pass
                else:
                    torch.cuda.synchronize()
                return lm_head(hidden_states)
    """
    check(source)
    # The same branches under a flag that is no diagnostic switch: every sync reports.
    for flag in ("SGLANG_TRACE_LOGITS_E2E_SYNC", "SGLANG_DEBUG_LOGITS", "VLLM_LOGITS_TRACE", "SGLANG_PROFILE_LM_HEAD",
                 "SGLANG_LOGITS_VERBOSE", "enable_trace", "_profiling_enabled", "VERBOSE"):
        source = source.replace(flag, "STEP_FLAG")
    assert len(findings(source)) == 9


def test_flag_names_that_are_not_an_opt_in_diagnostic_mode_still_report():
    # Real bugs that look alike: a fast-path switch whose name merely contains a diagnostic word, a
    # negated flag, trace data (not a switch), an engine-step flag, a comparison on a trace value,
    # a `.get(key)` lookup, and an env field read with `.get()` whose name says nothing diagnostic.
    check("""
        import torch

        from sglang.srt.environ import envs

        class LogitsProcessor(torch.nn.Module):
            def forward(self, hidden_states, lm_head, trace_ctx, trace_len):
                if self.enable_trace_free_path:
                    torch.cuda.synchronize()  # expect: GPU201
                if envs.SGLANG_ENABLE_TRACE_FREE_PATH.get():
                    torch.cuda.synchronize()  # expect: GPU201
                if envs.SGLANG_NO_TRACE.get():
                    torch.cuda.synchronize()  # expect: GPU201
                if envs.SGLANG_DISABLE_PROFILE_SYNC:
                    torch.cuda.synchronize()  # expect: GPU201
                if self.use_cuda_graph:
                    torch.cuda.synchronize()  # expect: GPU201
                if trace_ctx:
                    torch.cuda.synchronize()  # expect: GPU201
                if self.trace_replay_state:
                    torch.cuda.synchronize()  # expect: GPU201
                if self.profile_in_progress:
                    torch.cuda.synchronize()  # expect: GPU201
                if trace_len <= 0:
                    torch.cuda.synchronize()  # expect: GPU201
                if self.config.get("trace"):
                    torch.cuda.synchronize()  # expect: GPU201
                if envs.SGLANG_ENABLE_LOGITS_SYNC.get():
                    torch.cuda.synchronize()  # expect: GPU201
                if self.retrace:
                    torch.cuda.synchronize()  # expect: GPU201
                if envs.SGLANG_TRACE_LOGITS_E2E_SYNC.get():
                    pass
                else:
                    torch.cuda.synchronize()  # expect: GPU201
                return lm_head(hidden_states)
    """)


def test_diagnostic_flag_in_a_helper_is_cold_for_its_hot_caller():
    # What made `LogitsProcessor.forward` report `_get_logits` (a call site, not the sync): the
    # helper's sync is under a trace flag, so the helper's summary has no sync.
    source = """
        import torch

        from sglang.srt.environ import envs

        class LogitsProcessor(torch.nn.Module):
            def forward(self, hidden_states, lm_head):
                return self._get_logits(hidden_states, lm_head)

            def _get_logits(self, hidden_states, lm_head):
                if envs.SGLANG_TRACE_LOGITS_E2E_SYNC.get():
                    torch.cuda.synchronize()
                return lm_head(hidden_states)
    """
    assert findings(source) == set()
    assert findings(source.replace("SGLANG_TRACE_LOGITS_E2E_SYNC", "SGLANG_LOGITS_E2E_SYNC")) == {(8, "GPU201")}


# -- summaries: helpers in this and other files -------------------------------------------------

def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    return root


def _project_findings(root: Path, **options) -> set[tuple[str, int, str]]:
    merged = {**OPTIONS, **options}
    return {(Path(d.path).name, d.line, d.code) for d in lint_paths([str(root)], **merged) if d.code.startswith("GPU2")}


def test_helper_in_another_file_is_reported_at_the_hot_call_site(tmp_path):
    root = _project(tmp_path, {
        "ops.py": """
            import torch

            def to_host(x_gpu):
                return x_gpu.tolist()

            def relay(x_gpu):
                return to_host(x_gpu)

            def clean(x_cpu):
                return x_cpu.tolist()
        """,
        "model.py": """
            import torch
            from . import ops
            from .ops import relay as forwarded

            class M(torch.nn.Module):
                def forward(self, x: torch.Tensor):
                    a = ops.to_host(x)
                    b = forwarded(x)
                    c = ops.clean(x)
                    return a, b, c
        """,
    })
    assert _project_findings(root) == {("model.py", 8, "GPU201"), ("model.py", 9, "GPU201")}
    found = [d.message for d in lint_paths([str(root)], **OPTIONS) if d.line == 9 and d.code == "GPU201"]
    assert found == [("undeclared GPU->CPU sync in model forward `M.forward`: `relay()` calls `to_host` (line 8), "
                     "which syncs with `.tolist()` on `x_gpu` (line 5)")]


def test_a_tensor_tested_to_be_on_the_cpu_is_a_host_tensor_there():
    """A metadata builder reads any tensor of unknown device as a possible sync
    (``unknown-device``), but not on a path where a test says it is on the CPU. Only a CPU test
    says so: a tensor that is not CUDA may be on another accelerator (``not t.is_cuda``)."""
    check("""
        import torch


        class FooMetadataBuilder:
            def build(self, common, flag: bool):
                lens = common.seq_lens
                if lens.is_cpu:
                    a = lens.max().item()
                if lens.device.type == "cpu" and flag:
                    b = lens.tolist()
                if "cpu" != lens.device.type:
                    pass
                else:
                    c = int(lens.sum())
                if not common.query_lens.is_cpu:
                    return None
                d = common.query_lens.tolist()
                e = lens.tolist() if lens.is_cpu else None
                f = lens.tolist() if lens.is_cpu or flag else None  # expect: GPU201
                if not lens.is_cuda:
                    g = lens.tolist()  # expect: GPU201
                if lens.device.type != "cpu":
                    h = lens.tolist()  # expect: GPU201
                if lens.is_cpu:
                    lens = common.seq_lens_gpu
                    i = lens.tolist()  # expect: GPU201
                return a, b, c, d, e, f, g, h, i
    """)


def test_past_an_assert_its_test_holds():
    check("""
        import torch


        class FooMetadataBuilder:
            def build(self, common, flag: bool):
                lens = common.seq_lens
                assert lens.is_cpu
                a = lens.tolist()
                starts = common.query_start_loc
                assert starts.device.type == "cpu" or flag
                b = starts.tolist()  # expect: GPU201
                assert not common.positions.is_cuda  # another accelerator is no CPU
                c = common.positions.tolist()  # expect: GPU201
                return a, b, c
    """)


def test_a_subclass_of_any_of_torchs_modules_is_a_module():
    check("""
        import torch
        from torch import nn


        class ScaledEmbedding(nn.Embedding):
            def forward(self, ids):
                return torch.zeros(3, device="cuda").tolist()  # expect: GPU201


        class Head(torch.nn.modules.linear.Linear):
            def forward(self, x):
                return torch.zeros(3, device="cuda").tolist()  # expect: GPU201


        class Blocks(nn.ModuleList):
            def forward(self, x):
                return torch.zeros(3, device="cuda").tolist()  # expect: GPU201


        class Scale(nn.Parameter):  # a tensor, not a module
            def forward(self, x):
                return torch.zeros(3, device="cuda").tolist()


        class Options(nn.utils.rnn.PackedSequence):
            def forward(self, x):
                return torch.zeros(3, device="cuda").tolist()
    """)


def test_the_torch_nn_classes_that_are_no_modules_are_those_torch_has():
    torch = pytest.importorskip("torch")
    import inspect

    from sync_lint.analysis.hot_words import is_torch_module_class

    for name in dir(torch.nn):
        value = getattr(torch.nn, name)
        if name[:1].isupper() and inspect.isclass(value):
            assert is_torch_module_class(f"torch.nn.{name}") == issubclass(value, torch.nn.Module), name


def test_a_memo_test_that_asks_more_besides_still_runs_once_per_key():
    """unsloth's ``if call is not None and key not in _FAST_CHECKED:`` checks a fast path once per
    key and records it; an ``or`` may hold with the key recorded, and runs again."""
    check("""
        import torch

        _CHECKED = {}


        class Packed(torch.nn.Linear):
            def forward(self, x, call):
                probe = torch.zeros(4, device="cuda")
                key = (x.shape, x.dtype)
                if call is not None and key not in _CHECKED:
                    _CHECKED[key] = bool((probe.abs().max() < 1).item())
                if call is not None or key not in _CHECKED:
                    _CHECKED[key] = bool((probe.abs().max() < 1).item())  # expect: GPU201
                if call is not None and key not in _CHECKED:
                    ok = bool((probe.abs().max() < 1).item())  # expect: GPU201
                return x
    """)


def _fast_and_plain(root: Path, **options) -> tuple[list, list]:
    """The findings of a run of ``root`` with the plans and scouts (fast) and without."""
    settings = api.make_settings(None, **{**OPTIONS, **options})
    files = Discovery(DEFAULT_EXCLUDE, settings.root).files([str(root)])
    fast = Linter(settings, fast=True).run(files, jobs=1).diagnostics
    plain = Linter(settings, fast=False).run(files, jobs=1).diagnostics
    return [(Path(d.path).name, d.line, d.code) for d in fast], [(Path(d.path).name, d.line, d.code) for d in plain]


FORMATTED = """
    import logging

    import torch

    logger = logging.getLogger(__name__)


    class Model(torch.nn.Module):
        def forward(self, n: int, x_cpu: torch.Tensor):
            x = torch.arange(n, device="cuda")
            a = f"{x}"  # expect: GPU202
            b = f"{x.max():.2f} {x!r}"  # expect: GPU202
            print("lens", x)  # expect: GPU202
            c = str(x.sum())  # expect: GPU202
            d = repr(x)  # expect: GPU202
            e = format(x[0], "d")  # expect: GPU202
            logger.debug(f"step {x}")  # expect: GPU202
            f = f"{x.shape} {x.dtype} {x.device} {x.numel()} {x.size(0)} {len(x)} {n}"
            g = str(x.shape) + repr(x.device)
            print("shape", x.shape, n)
            logger.debug("step %s", x)
            h = f"{x_cpu} {x_cpu.sum()}" + str(x_cpu)
            if n < 0:
                raise ValueError(f"bad lengths {x}")
            assert n > 0, f"no lengths: {x}"
            return a, b, c, d, e, f, g, h
"""


def test_formatting_a_gpu_tensor_as_text_syncs(tmp_path):
    """A tensor's text holds its values: an f-string, ``str()``, ``print()`` of one on the GPU
    copies it to the host every step (a debug print left in ``forward``, an eager log message).
    Its metadata formats without a sync; an error path's message (``raise``, an ``assert``'s
    message) costs nothing per step; a logger's lazy ``%s`` argument is formatted only if the
    record is emitted, by the logging library. A file checked on its own is first read by the
    scout, which must let it through for these sites alone (``SyncScout._may_sync_at``)."""
    check(FORMATTED)
    (tmp_path / "model.py").write_text(textwrap.dedent(FORMATTED))
    fast, plain = _fast_and_plain(tmp_path / "model.py")
    assert fast == plain and len(fast) == 8  # two on the line formatting two values


def test_a_helper_that_only_formats_a_gpu_tensor_is_reported_at_the_hot_call_site(tmp_path):
    """The project plan follows hot code into a helper only as far as it may sync: a
    formatted tensor counts (``SyncScout._may_sync_at``), on the fast path as on the plain one."""
    root = _project(tmp_path, {
        "ops.py": """
            import torch

            def describe(x_gpu):
                return f"lengths {x_gpu}"

            def shape_of(x_gpu):
                return f"shape {x_gpu.shape}"
        """,
        "model.py": """
            import torch
            from .ops import describe, shape_of

            class M(torch.nn.Module):
                def forward(self, x: torch.Tensor):
                    return describe(x), shape_of(x)
        """,
    })
    assert _project_findings(root) == {("model.py", 7, "GPU201")}
    fast, plain = _fast_and_plain(root)
    assert fast == plain == [("model.py", 7, "GPU201")]


def test_fast_and_plain_paths_agree_on_the_fixtures():
    settings = api.make_settings(None, **OPTIONS)
    files = Discovery(DEFAULT_EXCLUDE, settings.root).files([str(ROOT / "fixtures"), str(ROOT / "reference_kernels")])
    fast = Linter(settings, fast=True).run(files, jobs=1).diagnostics
    plain = Linter(settings, fast=False).run(files, jobs=1).diagnostics

    def key(d):
        return d.path, d.line, d.col, d.code, d.message

    assert sorted(map(key, fast)) == sorted(map(key, plain))


def test_self_helper_and_nested_function_summaries():
    check("""
        import torch

        class FooMetadataBuilder:
            def build(self, common):
                def inner():
                    return common.seq_lens.tolist()
                a = self._lens(common)  # expect: GPU201
                b = inner()
                c = self._host(common)
                return a, b, c

            def _lens(self, common):
                return common.seq_lens.tolist()

            def _host(self, common):
                return common.seq_lens_cpu.tolist()
    """)


# -- GPU203 -------------------------------------------------------------------------------------

HOST_COPY_BUILDER = """
    from reference_kernels.sync_check import gpu_sync_allowed
    from proj.backend import Base


    class FooMetadataBuilder:
        def __init__(self, lens_cpu):
            self.lens_cpu = lens_cpu

        def build(self, common, lens_cpu, use_cpu):
            with gpu_sync_allowed():
                seq_lens_cpu = common.seq_lens_cpu
            with gpu_sync_allowed():
                positions_np = common.metadata.positions_np[:4]
            with gpu_sync_allowed():
                shown = int(lens_cpu.max())
            with gpu_sync_allowed():
                mine = self.lens_cpu
            with gpu_sync_allowed():
                flag = common.use_cpu and use_cpu
            return seq_lens_cpu, positions_np, shown, mine, flag


    class Inherited(Base):
        def build(self):
            with gpu_sync_allowed():
                return self.seq_lens_cpu

        @property
        def own_cpu(self):
            return self.lens.cpu()

        def own(self):
            with gpu_sync_allowed():
                return self.own_cpu
"""


@pytest.mark.parametrize(("backend", "stale_lines"), [
    # `seq_lens_cpu` a property that copies on first read (aphrodite-engine, a vLLM fork, and vLLM
    # before it made it a field): the declarations around reading it are needed.
    ("""
     import torch
     from typing_extensions import deprecated

     class Base:
         @property
         @deprecated(
             '''
         Prefer the device seq_lens: this copy syncs.
         '''
         )
         def seq_lens_cpu(self) -> torch.Tensor:
             if self._seq_lens_cpu is None:
                 self._seq_lens_cpu = self.seq_lens.to("cpu")
             return self._seq_lens_cpu
     """, {13, 15, 17, 19}),
    # A field: only host data is read, the declarations are stale (`positions_np`, which no file
    # defines, is in both cases).
    ("""
     from dataclasses import dataclass

     import torch

     @dataclass
     class Base:
         seq_lens_cpu: torch.Tensor
     """, {11, 13, 15, 17, 19, 26}),
])  # fmt: skip
def test_a_host_copy_read_off_another_object_is_stale_unless_a_property_makes_it(tmp_path, backend, stale_lines):
    # Removing a needed declaration, as GPU203's fix does, would fail the engine's sync check. A
    # field the class sets, a host tensor of the function's own, a flag about the host
    # (`use_cpu`), or a property of the class's own (`own_cpu`: judged as the function it is).
    root = _project(tmp_path, {"backend.py": backend, "builder.py": HOST_COPY_BUILDER})
    files = [str(path) for path in sorted(root.glob("*.py"))]
    for fast in (True, False):
        found = Linter(make_settings(**OPTIONS), fast=fast).run(files, jobs=1).diagnostics
        assert {d.line for d in found if d.code == "GPU203"} == stale_lines, fast


def test_stale_declaration_judges_same_file_helpers_but_trusts_other_files(tmp_path):
    root = _project(tmp_path, {
        "helpers.py": """
            def pure(x_cpu):
                return x_cpu.tolist()
        """,
        "builder.py": """
            from reference_kernels.sync_check import gpu_sync_allowed
            from .helpers import pure

            def local_pure(x_cpu):
                return x_cpu.tolist()

            def local_sync(x):
                return x.cuda().tolist()

            class FooMetadataBuilder:
                def build(self, common, lens_cpu):
                    with gpu_sync_allowed():
                        a = pure(lens_cpu)
                    with gpu_sync_allowed():
                        b = local_pure(lens_cpu)
                    with gpu_sync_allowed():
                        c = local_sync(common.seq_lens)
                    with gpu_sync_allowed():
                        d = await_later = common.metadata_ready
                    return a, b, c, d
        """,
    })
    stale = {f for f in _project_findings(root) if f[2] == "GPU203"}
    assert stale == {("builder.py", 15, "GPU203"), ("builder.py", 19, "GPU203")}


# -- fixes --------------------------------------------------------------------------------------

BUILDER = """\
import torch


class FooMetadataBuilder:
    def build(self, common):
        lens = common.seq_lens.tolist()
        if common.query_lens.any():
            pass
        return lens
"""


def test_no_fix_without_a_configured_guard():
    diagnostics = lint_text(BUILDER, preview=True)
    assert {d.code for d in diagnostics} == {"GPU201", "GPU202"}
    assert all(d.fix is None for d in diagnostics)
    assert fix_text(BUILDER, unsafe=True, preview=True) == BUILDER


def test_fixes_are_unsafe_and_compose_with_one_import():
    assert fix_text(BUILDER, **OPTIONS) == BUILDER  # unsafe fixes only with --unsafe-fixes
    fixed = fix_text(BUILDER, unsafe=True, **OPTIONS)
    assert fixed.count("from reference_kernels.sync_check import gpu_sync_allowed") == 1
    assert fixed.count("with gpu_sync_allowed():") == 2
    assert findings(fixed) == set()


def test_fix_reuses_an_existing_import_or_alias():
    source = "from reference_kernels.sync_check import gpu_sync_allowed as allowed\n\n" + BUILDER
    fixed = fix_text(source, unsafe=True, sync_declarations=["gpu_sync_allowed", "allowed"], **OPTIONS)
    assert "with allowed():" in fixed and fixed.count("import gpu_sync_allowed") == 1


def test_elif_test_wraps_the_whole_if():
    source = textwrap.dedent("""\
        class FooMetadataBuilder:
            def build(self, common):
                if common.flag:
                    return 0
                elif common.seq_lens.tolist():
                    return 1
                return 2
    """)
    fixed = fix_text(source, unsafe=True, **OPTIONS)
    assert "        with gpu_sync_allowed():\n            if common.flag:\n" in fixed
    assert findings(fixed) == set()


def test_stale_unwrap_without_fix_for_as_and_conditional_forms():
    source = textwrap.dedent("""\
        from contextlib import nullcontext
        from reference_kernels.sync_check import gpu_sync_allowed


        def f(x_cpu, check):
            with gpu_sync_allowed() as allowed:
                a = x_cpu.tolist()
            cm = gpu_sync_allowed() if check else nullcontext()
            with cm:
                b = x_cpu.tolist()
            return a, b, allowed
    """)
    diagnostics = [d for d in lint_text(source, **OPTIONS) if d.code == "GPU203"]
    assert [d.line for d in diagnostics] == [6, 9]
    assert all(d.fix is None for d in diagnostics)


def test_summary_lines_are_exact():
    source = """
        import torch


        def helper(x_gpu):
            y = 1

            return x_gpu.tolist()


        class M(torch.nn.Module):
            def forward(self, x: torch.Tensor):
                return helper(x)
    """
    assert messages(source) == [("undeclared GPU->CPU sync in model forward `M.forward`: `helper()` syncs with "
                                "`.tolist()` on `x_gpu` (line 8)")]


def test_files_without_triggers_are_not_parsed():
    from sync_lint.pipeline.prefilter import may_match
    from sync_lint.rules import rule_by_code

    text = "def f(a, b):\n    return a + b\n"
    for code in ("GPU201", "GPU202", "GPU203", "GPU204"):
        assert not may_match(rule_by_code(code)(), text)
    # Names that merely contain "sync" are no declaration: only the configured ones are.
    assert not may_match(rule_by_code("GPU203")(), "async def f(x, is_sync_step):\n    return await x\n")
    assert may_match(rule_by_code("GPU203")(), "with gpu_sync_allowed():\n    pass\n")


def test_a_configured_name_without_a_literal_part_makes_the_rule_always_run():
    # `*` matches every class: no text can be required of a file, so none is skipped.
    from sync_lint.pipeline.prefilter import may_match
    from sync_lint.rules import rule_by_code

    settings = make_settings(hot_class_patterns=["*"])
    rule = rule_by_code("GPU201")(settings)
    assert rule.triggers == () and may_match(rule, "x = 1\n")
    assert rule_by_code("GPU201")(make_settings()).triggers != ()


def test_tensor_annotations_do_not_place_a_tensor_on_the_gpu():
    # vLLM hands host tensors to forwards too (`grid_thw`, sizes): an annotation is no evidence.
    source = """
        import torch

        class VisionTower(torch.nn.Module):
            def forward(self, x: torch.Tensor, grid_thw: torch.Tensor | list[list[int]]):
                sizes = grid_thw.tolist()
                return x.to(self.device, non_blocking=True).sum().item(), sizes
    """
    assert findings(source) == {(7, "GPU201")}
    assert findings(source, unknown_device="always") == {(6, "GPU201"), (7, "GPU201")}


def test_cpu_backends_are_not_hot():
    source = """
        class CPUAttentionMetadataBuilder:
            def build(self, common):
                return common.seq_lens.tolist()
    """
    assert findings(source) == set()
    assert findings(source.replace("CPUAttention", "FlashAttention")) == {(4, "GPU201")}
    assert findings(source.replace("CPUAttention", "FlashAttention"), path="backends/cpu_attn.py") == set()


def test_a_cpu_name_wins_over_an_unknown_assignment():
    check("""
        class FooMetadataBuilder:
            def build(self, common):
                lens_cpu = self.compute(common)
                lens = self.compute(common)
                return lens_cpu.tolist(), lens.tolist()  # expect: GPU201
    """)


def test_a_module_moved_to_the_gpu_is_not_a_tensor():
    check("""
        import torch

        class FooMetadataBuilder:
            def __init__(self, device):
                self.planner = Planner().to(device)
                self.backend = make_backend().clone()
                self.buf = torch.zeros(4).to(device)

            def build(self, common):
                if self.planner and self.backend.get_name() == "X":
                    pass
                if self.buf.any():  # expect: GPU202
                    pass
    """)


def test_host_tensors_stay_on_the_host_through_arithmetic_with_unknowns():
    check("""
        import torch

        class FooMetadataBuilder:
            def build(self, common, stateful_rows):
                seq_lens_cpu = common.seq_lens_cpu
                blocks = int(((seq_lens_cpu + self.block_size - 1) // self.block_size).sum())
                to_decode = stateful_rows & (common.query_lens_cpu == 1)
                if torch.any(to_decode).item():
                    pass
                pinned = torch.zeros(4, pin_memory=True)
                both = (pinned + common.offsets).max().item()
                return blocks, both
    """)


def test_every_expression_kind_is_walked():
    # async code, yields, f-strings, dicts, sets, starred, walrus, lambdas: no crash, syncs found inside.
    check("""
        import torch

        class FooMetadataBuilder:
            async def build(self, common):
                x = await common.fetch()
                y = {"a": common.seq_lens.tolist(), **common.extra}  # expect: GPU201
                z = {common.lens.tolist()[0], *common.more}  # expect: GPU201
                w = f"{common.seq_lens.tolist()!r:>10}"  # expect: GPU201
                if (n := common.seq_lens.tolist()):  # expect: GPU201
                    pass
                f = lambda: common.seq_lens.tolist()
                return x, y, z, w, f, -common.seq_lens.max().item()  # expect: GPU201

            def build_for_cudagraph_capture(self, common):
                yield common.seq_lens.tolist()  # expect: GPU201
                yield from common.seq_lens.tolist()  # expect: GPU201
                return (yield)
    """)


def test_configured_names_reach_the_prefilter():
    """A project's own declaration and hot-class names are triggers too: a file that only
    mentions them is still parsed."""
    stale = (
        "from engine.debug import permit_host_read\n\n"
        "class StepRunner:\n"
        "    def execute(self, batch):\n"
        "        with permit_host_read():\n"
        "            n = len(batch)\n"
        "        return n\n"
    )
    found = lint_text(stale, select=["GPU203"], sync_declarations=["permit_host_read"])
    assert [d.code for d in found] == ["GPU203"]
    assert lint_text(stale, select=["GPU203"]) == []  # not a declaration by default
    hot = (
        "class StepRunner:\n"
        "    def execute(self, batch):\n"
        "        if batch.valid_mask.any():\n"
        "            return 1\n"
    )
    found = lint_text(hot, select=["GPU202"], hot_class_patterns=["*StepRunner"], hot_method_patterns=["execute"])
    assert [d.code for d in found] == ["GPU202"]


def test_torch_metadata_predicates_are_python_values():
    # SGLang `prepare_sdpa_mask`: `torch.is_floating_point(mask)` reads the dtype, not the data;
    # `torch.equal` does read both tensors and stays a sync.
    check("""
        import torch

        def prepare_mask(mask: torch.Tensor, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
            mask = mask.to(device=device)
            if torch.is_floating_point(mask) or torch.is_complex(mask):
                return mask.to(dtype=dtype)
            return mask

        def check_positions(positions, expected):
            positions = positions.to(expected.device)
            assert torch.equal(positions.cuda(), expected)
            return positions

        class Attention(torch.nn.Module):
            def forward(self, q: torch.Tensor, mask: torch.Tensor, positions):
                q = q.to(self.device)
                if torch.is_tensor(q) and torch.is_floating_point(q) and q.dim() == 3:
                    q = q * 2
                n = torch.numel(q) + int(torch.is_grad_enabled())
                check_positions(positions, q)  # expect: GPU201
                return q, n, prepare_mask(mask, dtype=q.dtype, device=q.device)
    """)


def test_torch_predicates_and_runtime_state_are_python_values():
    # vLLM `MiniMaxM3IndexerTritonCPImpl.forward`: `if torch.compiler.is_compiling():` reads the
    # compiler's state, no tensor; in a metadata builder, where a torch op's result of unknown
    # device is reported, neither it nor any `torch.*.is_*()` / `has_*()` predicate is a sync.
    # `torch.is_nonzero(t)` reads the data (a sync); `torch.any(t)` is a tensor.
    check("""
        import torch
        import torch.distributed as dist

        class FooMetadataBuilder:
            def build(self, common, mask):
                if torch.compiler.is_compiling() or torch._dynamo.is_compiling():
                    return None
                if torch.jit.is_scripting() or torch.jit.is_tracing():
                    return None
                if dist.is_initialized() and torch.distributed.is_available():
                    return None
                if torch.backends.cuda.is_flash_attention_available():
                    return None
                if torch.cuda.is_current_stream_capturing() or torch.is_inference_mode_enabled():
                    return None
                if torch.is_nonzero(mask):  # expect: GPU202
                    return None
                if torch.any(mask):  # expect: GPU202
                    return None
                return common
    """)


def test_memoized_helpers_sync_once_per_key_not_per_step(tmp_path):
    # SGLang `complex_rope_triton._fuse_real_sin(device)` and `_cached_sparse_permutation(h, w, ..., device)`:
    # `functools.lru_cache` runs the body once per key; a tensor-annotated argument misses every step.
    helpers = tmp_path / "helpers.py"
    helpers.write_text(textwrap.dedent("""
        import functools
        from functools import lru_cache

        import torch

        @lru_cache
        def fuse_real_sin(device: torch.device) -> bool:
            values = torch.tensor([[1.0, -1.0], [1.0, 1.0]], device=device)
            return values.sum().item() != 0

        @functools.lru_cache(maxsize=64)
        def cached_permutation(grid_h: int, grid_w: int, device: torch.device):
            order = torch.arange(grid_h * grid_w, device=device)
            return order, tuple((order % 2).sum(dim=0, keepdim=True).tolist())

        @functools.cache
        def cached_by_tensor(x: torch.Tensor):
            return x.cuda().sum().item()
    """))
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent("""
        import torch
        from helpers import cached_by_tensor, cached_permutation, fuse_real_sin

        class Rope(torch.nn.Module):
            def forward(self, x: torch.Tensor):
                x = x.to(self.device)
                if fuse_real_sin(x.device):
                    x = x * 2
                order, lengths = cached_permutation(4, 4, x.device)
                return x, order, lengths, cached_by_tensor(x)
    """))
    found = sorted((Path(d.path).name, d.line, d.code) for d in lint_paths([str(tmp_path)], **OPTIONS))
    assert found == [("model.py", 11, "GPU201")]


def test_memoized_methods_run_once_per_key_not_per_step():
    # SGLang `NDRotaryEmbedding._forward_cached(pos_tuple, device_str)` under
    # `functools.lru_cache`: the instance is the same key every step; a tensor-annotated
    # argument misses the cache every step.
    check("""
        import functools

        import torch


        class FlashMetadataBuilder:
            @functools.lru_cache(maxsize=16)
            def _positions(self, pos_tuple: tuple[int, ...], device_str: str):
                positions = torch.tensor(pos_tuple, dtype=torch.long, device=torch.device(device_str))
                return positions, int(positions.max().item())

            @functools.lru_cache(maxsize=16)
            def _longest(self, lens: torch.Tensor):
                return int(lens.max().item())

            def build(self, common_prefix_len, common):
                positions = self._positions(tuple(common.seq_lens_cpu.tolist()), "cuda")
                return positions, self._longest(common.seq_lens)  # expect: GPU201
    """)


def test_lazy_initialisation_runs_once_not_per_step():
    # vLLM `DeepGemmMegaMoEExperts._synchronize_first_launch` (a set of synchronized groups) and
    # `_BufferPool.get` / `get_symm_buffer` (a pool created on first use): the sync runs on the
    # first call per key, then the recorded state skips it.
    check("""
        import torch
        from typing import ClassVar

        _WORKSPACES = {}

        def workspace(device, n):
            ws = _WORKSPACES.get((device, n))
            if ws is None:
                ws = torch.empty(n, device=device)
                torch.cuda.synchronize()
                _WORKSPACES[(device, n)] = ws
            return ws

        class BufferPool:
            pools: ClassVar[dict] = {}

            @classmethod
            def get(cls, group, tokens, device):
                key = (id(group), tokens, device)
                pool = cls.pools.get(key)
                if pool is None:
                    torch.accelerator.synchronize()
                    pool = cls()
                    cls.pools[key] = pool
                return pool

        class MegaMoEExperts(torch.nn.Module):
            _synchronized: ClassVar[set] = set()

            def __init__(self):
                super().__init__()
                self.pool = None
                self._ready = False

            def _synchronize_first_launch(self, group):
                key = (id(group), torch.accelerator.current_device_index())
                if key in self._synchronized:
                    return
                torch.accelerator.synchronize()
                self._synchronized.add(key)

            def _get_buffer(self, x):
                if self.pool is not None:
                    return self.pool
                self.pool = BufferPool.get(None, 8, x.device)
                torch.cuda.synchronize()
                return self.pool

            def forward(self, x: torch.Tensor, group):
                x = x.to(self.device)
                self._synchronize_first_launch(group)
                buffer = self._get_buffer(x)
                if not self._ready:
                    self.scale = x.abs().max().item()
                    self._ready = True
                if self.pool is None: self.pool = x.sum().item()
                return x * self.scale, buffer, workspace(x.device, 4)
    """)


def test_lazy_initialisation_through_a_local_copy_of_the_state_runs_once():
    # vLLM `KimiK3KDAMetadataBuilder._get_recoverssm_context`: `context = self.recoverssm_context;
    # if context is not None: return context`, then the context is built (a blocking copy onto
    # the GPU, GPU205) and stored. Read into a local, the state is tested as `self.` state is; a
    # function that never stores it back syncs every step.
    check("""
        import torch


        class Builder:
            def _get_context(self, n):
                context = self._context
                if context is not None:
                    return context
                context = torch.tensor(list(range(n)), device="cuda")
                self._context = context
                return context

            def _longest(self, lens_gpu):
                longest = self._longest_seen
                if longest is not None:
                    return longest
                longest = int(lens_gpu.max().item())
                self._longest_seen = longest
                return longest

            def _never_stored(self, lens_gpu):
                longest = self._longest_kept
                if longest is not None:
                    return longest
                return int(lens_gpu.max().item())

            def _mask(self, n, lens_gpu):
                # SGLang `AscendAttnBackend.generate_alibi_bias`: the state tested through `getattr`.
                if getattr(self, "super_mask", None) is None:
                    self.super_mask = torch.ones(n).to("cuda")
                    self.widest = int(lens_gpu.max().item())
                return self.super_mask


        class FlashMetadataBuilder(Builder):
            def build(self, common_prefix_len, common):
                a = self._get_context(8)
                b = self._longest(common.seq_lens)
                c = self._never_stored(common.seq_lens)  # expect: GPU201
                return a, b, c, self._mask(8, common.seq_lens)
    """)


def test_lazy_initialisation_through_hasattr_runs_once():
    # transformers `EsmFoldStructureModule._init_residue_constants` and vLLM's TurboQuant
    # attention: `if not hasattr(self, "frames"): self.frames = torch.tensor(..., device=...)`,
    # the state tested by whether the attribute exists. A region that never sets what it tests,
    # or tests per-step state (the metadata handed in), runs every step.
    check("""
        import torch
        from torch import nn


        class Structure(nn.Module):
            def _init_constants(self, device, lens_gpu):
                if not hasattr(self, "frames"):
                    self.frames = torch.tensor([[1.0, 0.0], [0.0, 1.0]], device=device)
                    self.longest = int(lens_gpu.max().item())

            def _cached_total(self, lens_gpu):
                if hasattr(self, "_total"):
                    return self._total
                total = int(lens_gpu.sum().item())
                self._total = total
                return total

            def _never_stored(self, lens_gpu):
                if not hasattr(self, "_widest"):
                    return int(lens_gpu.max().item())
                return self._widest

            def forward(self, x: torch.Tensor, lens_cpu: torch.Tensor) -> torch.Tensor:
                lens = lens_cpu.to(x.device)  # expect: GPU205
                self._init_constants(x.device, lens)
                n = self._cached_total(lens)
                w = self._never_stored(lens)  # expect: GPU201
                return x * n * w


        class TurboAttentionImpl:
            def forward(self, layer, query, key, value, kv_cache, attn_metadata):
                if not hasattr(layer, "_rotation"):
                    layer._rotation = torch.tensor([1.0, -1.0]).to(query.device)
                    layer._scale = float(query.abs().max().item())
                if not hasattr(attn_metadata, "max_len"):
                    attn_metadata.max_len = int(attn_metadata.seq_lens.max().item())  # expect: GPU201
                return query * layer._scale
    """)


def test_lazy_initialisation_by_a_method_of_a_module_level_object_runs_once():
    # SGLang `ipc_a2a_multi_ready(group)`: `if IPC_A2A_MULTI.inited: return True`, then
    # `IPC_A2A_MULTI.init(group)` (which sets `inited`) and an agreement read with `.item()`: the
    # first call per process syncs, later ones return early. A method of the module-level
    # object whose attribute is tested may set it; one of another object, or of `self` (whose
    # other methods the step may run again), is not taken for it.
    check("""
        import torch
        from torch import nn

        TRANSPORT = Transport()
        OTHER = Transport()

        def transport_ready(group):
            if TRANSPORT.inited:
                return True
            try:
                TRANSPORT.init(group)
            except RuntimeError:
                return False
            agreed = torch.ones(1, device="cuda")
            return agreed.item() == 1

        def other_ready(group):
            if TRANSPORT.inited:
                return True
            OTHER.init(group)
            agreed = torch.ones(1, device="cuda")
            return agreed.item() == 1

        class Model(nn.Module):
            def ready(self, group):
                if self.inited:
                    return True
                self.init(group)
                return torch.ones(1, device="cuda").item() == 1

            def forward(self, x, group):
                a = transport_ready(group)
                b = other_ready(group)  # expect: GPU201
                c = self.ready(group)  # expect: GPU201
                return x, a, b, c
    """)


def test_a_value_cached_on_the_layer_module_runs_once_per_layer():
    # vLLM `FlashInferImpl.forward`: `if layer._o_scale_float is None: layer._o_scale_float =
    # output_scale.cpu().item()`; SGLang `AiterAttnBackend._resolve_fp8_kv_scale_float`:
    # `cached = getattr(layer, "_aiter_kv_scale_float", None)`, returned when set. The layer
    # module lives as long as the model; the step's metadata or batch does not. So does an
    # object bound at module level.
    check("""
        _STATE = State()

        class AiterAttnBackend:
            def _resolve_scale(self, layer, k_descale):
                cached = getattr(layer, "_kv_scale_float", None)
                if cached is not None:
                    return cached
                val = float(k_descale.item())
                layer._kv_scale_float = val
                return val

            def _per_batch(self, forward_batch, k_descale):
                cached = getattr(forward_batch, "_kv_scale_float", None)
                if cached is not None:
                    return cached
                val = float(k_descale.item())
                forward_batch._kv_scale_float = val
                return val

            def forward_decode(self, q, k, v, layer, forward_batch):
                once = self._resolve_scale(layer, k)
                every_step = self._per_batch(forward_batch, k)  # expect: GPU201
                return once + every_step

        class FlashInferImpl:
            def forward(self, layer, query, output_scale, attn_metadata):
                if layer._o_scale_float is None:
                    layer._o_scale_float = output_scale.cpu().item()
                if attn_metadata.scale is None:
                    attn_metadata.scale = output_scale.cpu().item()  # expect: GPU201
                if _STATE.scale is None:
                    _STATE.scale = output_scale.cpu().item()
                if self._scale is None:
                    self._scale = getattr(layer, "scale", None).cpu().item()  # expect: GPU201
                return query

            def reset(self):
                self._scale = None
    """)


def test_state_that_changes_every_step_is_not_once():
    # vLLM `ROCMAiterMLASparseMetadataBuilder.build`: a single-entry cache keyed by the step's
    # sequence lengths syncs whenever they change; a memo another method resets is per step; a
    # test with more conditions (a buffer that grows), a store under a condition, a local
    # variable, or an early return that records nothing all run again.
    check("""
        import torch

        class SparseMetadataBuilder:
            def __init__(self, device):
                self._prev_key = None
                self._plan = None
                self._buf = None
                self._seen = set()

            def reset(self):
                self._plan = None

            def build(self, common, key):
                if key != self._prev_key:
                    torch.cuda.current_stream().synchronize()  # expect: GPU201
                    self._prev_key = key
                if self._plan is None:
                    torch.cuda.synchronize()  # expect: GPU201
                    self._plan = 1
                n = common.num_actual_tokens
                if self._buf is None or self._buf.shape[0] < n:
                    torch.cuda.synchronize()  # expect: GPU201
                    self._buf = torch.empty(n, device="cuda")
                if key not in self._seen:
                    torch.cuda.synchronize()  # expect: GPU201
                    if n > 1:
                        self._seen.add(key)
                lens = None
                if lens is None:
                    lens = common.seq_lens.tolist()  # expect: GPU201
                    self._lens = lens
                if key in self._seen:
                    return self._buf
                torch.cuda.synchronize()  # expect: GPU201
                return lens
    """)


def test_a_high_water_mark_runs_once_per_new_maximum():
    # vLLM `Resampler2_5._adjust_pos_cache`: the position table grows when a larger image comes,
    # which warm-up meets. Not so where another method sets the mark (lower, or back), where the
    # body does not record it, where the test compares two states, or where the value compared
    # is the mark itself.
    check("""
        import torch
        from torch import nn

        class Resampler(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.max_size = size
                self.cap = 0
                self.rows = 0
                self.lower = 0

            def reset(self):
                self.rows = 1

            def _adjust(self, sizes, device):
                h = int(sizes[:, 0].max())
                w = int(sizes[:, 1].max())
                if h > self.max_size[0] or w > self.max_size[1]:
                    self.max_size = (max(h, self.max_size[0]), max(w, self.max_size[1]))
                    self.table = torch.randn(self.max_size).to(device)

            def forward(self, x, sizes):
                self._adjust(sizes, x.device)
                n = x.shape[0]
                if self.cap < n:
                    torch.cuda.synchronize()
                    self.cap = n
                if n >= self.rows:
                    torch.cuda.synchronize()  # expect: GPU201
                    self.rows = n
                if n > self.lower:
                    torch.cuda.synchronize()  # expect: GPU201
                if n > self.cap or n > self.rows:
                    torch.cuda.synchronize()  # expect: GPU201
                    self.cap = n
                if self.cap + 1 > self.cap:
                    torch.cuda.synchronize()  # expect: GPU201
                    self.cap = n
                return x
    """, preview=True)


def test_a_lazy_region_in_a_capture_still_counts():
    # Inside `torch.cuda.graph`, even a first-time sync fails the capture.
    check("""
        import torch

        class Runner:
            def __init__(self):
                self._scale = None

            def capture(self, g, x):
                with torch.cuda.graph(g):
                    if self._scale is None:
                        self._scale = x.cuda().max().item()  # expect: GPU201
                    return x
    """)


def test_a_parameter_moved_on_one_path_is_unknown_after_the_join(tmp_path):
    # vLLM `fmha_sm100._fmha_sm100_plan(..., qo_offset=None, ...)`: one branch moves `qo_offset`
    # to the GPU (and returns); on the path that reaches `.tolist()` it is what the caller passed
    # (the metadata builder passes a CPU tensor). Unknown, as for a `torch.Tensor` annotation; a
    # value the function itself puts on the GPU on every path still syncs.
    helpers = tmp_path / "plan.py"
    helpers.write_text(textwrap.dedent("""
        import torch

        def fmha_plan(qo_lens, kv_lens, qo_offset=None, device=None, prefill=False):
            device = torch.cuda.current_device() if device is None else device
            if prefill:
                qo_offset = qo_offset.to(device)
                return sparse_plan(qo_offset)
            return qo_offset.tolist() if qo_offset is not None else None

        def annotated_plan(qo_offset: torch.Tensor, prefill: bool):
            if prefill:
                qo_offset = qo_offset.to("cuda")
            return qo_offset.tolist()

        def device_plan(lens, device):
            if lens is None:
                lens = torch.zeros(4, device=device)
            else:
                lens = lens.to(device)
            return lens.tolist()
    """))
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent("""
        import torch
        from plan import annotated_plan, device_plan, fmha_plan

        class Indexer(torch.nn.Module):
            def forward(self, x: torch.Tensor, qo_cpu, kv_cpu):
                a = fmha_plan(qo_cpu, kv_cpu, qo_offset=kv_cpu - qo_cpu)
                b = annotated_plan(kv_cpu - qo_cpu, False)
                return a, b, device_plan(None, x.device)
    """))
    found = sorted((Path(d.path).name, d.line, d.code) for d in lint_paths([str(tmp_path)], **OPTIONS))
    assert found == [("model.py", 9, "GPU201")]


def test_a_same_file_helper_is_judged_with_the_host_arguments_of_the_call():
    # vLLM `AiterMLAMetadataBuilder._uniform_padded_mtp_qo_len(qo_len, ...)`: its summary syncs
    # (`qo_len.tolist()` on a parameter of unknown device, in a hot class), but `_build_decode`
    # passes `query_start_loc_cpu[1:] - query_start_loc_cpu[:-1]`, a CPU tensor.
    check("""
        import torch

        def host_max(lens):
            return int(lens.max().item())

        class AiterMLAMetadataBuilder:
            def __init__(self, device):
                self.indptr = torch.zeros(8, device=device)

            def _uniform_padded_mtp_qo_len(self, qo_len, num_decode_tokens):
                lens = qo_len.tolist()
                return 0 if num_decode_tokens <= sum(lens) else num_decode_tokens

            def _bound(self, lens):
                return int(lens.max().item()) + int(self.indptr[-1].item())

            def _relay(self, lens):
                return host_max(lens.to("cuda"))

            @staticmethod
            def _static_len(lens):
                return lens.tolist()

            def _build_decode(self, common, num_decode_tokens):
                qsl_cpu = common.query_start_loc_cpu
                qo_len = qsl_cpu[1:] - qsl_cpu[:-1]
                a = self._uniform_padded_mtp_qo_len(qo_len, num_decode_tokens)
                b = self._uniform_padded_mtp_qo_len(num_decode_tokens=8, qo_len=qo_len)
                c = host_max(qo_len) + host_max(common.seq_lens_cpu)
                d = self._static_len(qo_len)
                e = self._uniform_padded_mtp_qo_len(common.query_start_loc[1:], 8)  # expect: GPU201
                f = self._bound(qo_len)  # expect: GPU201
                g = self._relay(qo_len)  # expect: GPU201, GPU205 (`lens.to("cuda")` of the host `qo_len`)
                h = host_max(common.seq_lens.cuda())  # expect: GPU201
                return a, b, c, d, e, f, g, h
    """, unknown_device="always")



def test_a_same_file_helper_with_host_arguments_syncs_only_through_the_calls_it_still_makes(tmp_path):
    # vLLM Step5 `plan_prefill_step(attn_metadata, n, lengths, layout)` reads `int(lengths.max())`
    # (a parameter of unknown device, in a hot class), and the fallback in `forward` passes a numpy
    # array; the helper also calls `_upload` (same file) and `build_prefill_groups` (another file).
    # With the host lengths bound, the call syncs only if one of those calls does, as the
    # project's summaries say: named in the message, across files too. The fast path (the plan
    # masks a helper that cannot reach a sync) and the plain path must agree.
    root = _project(tmp_path, {
        "groups.py": """
            import torch

            def build_groups(owners):
                return torch.unique_consecutive(owners)

            def checked_groups(owners):
                torch.cuda.synchronize()
                return owners
        """,
        "impl.py": """
            import numpy as np
            import torch
            from .groups import build_groups, checked_groups
            from outside import outside_upload

            def _upload(values, device):
                return torch.as_tensor(values, device=device)

            def _upload_and_check(values, device):
                uploaded = torch.as_tensor(values, device=device)
                assert uploaded.sum().item() >= 0
                return uploaded

            def _relay(values, device):
                return build_groups(_upload(values, device))

            class Step5AttentionImpl:
                def forward(self, query, attn_metadata):
                    lengths = attn_metadata.seq_lens_cpu.numpy()
                    a = self.plan(attn_metadata, lengths)
                    b = self.plan_relayed(attn_metadata, lengths)
                    c = self.plan_outside(attn_metadata, lengths)
                    d = self.plan_checked(attn_metadata, lengths)  # expect: GPU201
                    e = self.plan_checked_elsewhere(attn_metadata, lengths)  # expect: GPU201
                    f = self.plan(attn_metadata, attn_metadata.seq_lens)  # expect: GPU201
                    return a, b, c, d, e, f

                def plan(self, attn_metadata, lengths):
                    owners = _upload(np.arange(len(lengths)), attn_metadata.slot_mapping.device)
                    return owners, (int(lengths.max()) + 7) // 8

                def plan_relayed(self, attn_metadata, lengths):
                    owners = _relay(np.arange(len(lengths)), attn_metadata.slot_mapping.device)
                    return owners, int(lengths.max())

                def plan_outside(self, attn_metadata, lengths):
                    owners = outside_upload(np.arange(len(lengths)), attn_metadata.slot_mapping.device)
                    return owners, int(lengths.max())

                def plan_checked(self, attn_metadata, lengths):
                    owners = _upload_and_check(np.arange(len(lengths)), attn_metadata.slot_mapping.device)
                    return owners, int(lengths.max())

                def plan_checked_elsewhere(self, attn_metadata, lengths):
                    owners = checked_groups(_upload(np.arange(len(lengths)), attn_metadata.slot_mapping.device))
                    return owners, int(lengths.max())
        """,
    })
    expected = {("impl.py", line, code) for line, code in expected_in_text((root / "impl.py").read_text())}
    assert _project_findings(root) == expected
    settings = make_settings(None, **OPTIONS)
    files = Discovery(DEFAULT_EXCLUDE, settings.root).files([str(root)])
    plain = Linter(settings, fast=False).run(files, jobs=1).diagnostics
    assert {(Path(d.path).name, d.line, d.code) for d in plain if d.code.startswith("GPU2")} == expected
    messages = sorted(d.message for d in lint_paths([str(root)], **OPTIONS) if d.code == "GPU201")
    assert any("`plan_checked()` calls `_upload_and_check` (line 42), which syncs with `.item()`" in m for m in messages)
    assert any("`plan_checked_elsewhere()` calls `checked_groups` (line 46), which syncs with `torch.cuda.sync" in m
               for m in messages)
    assert any("`plan()` syncs with `int()` of the tensor `lengths.max()`" in m for m in messages)


# -- Python bools read from tensor data ---------------------------------------------------------

def test_python_bools_read_from_gpu_data_sync_once_at_the_call():
    # On an H200 with `set_sync_debug_mode("error")` each of these raises, and each breaks a CUDA
    # graph capture; on CPU tensors they are plain host work. The bool is host-side afterwards.
    check("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, x: torch.Tensor, ref: torch.Tensor, x_cpu: torch.Tensor, y_cpu: torch.Tensor):
                x = x.to(self.device, non_blocking=True)
                ref = ref.to(self.device, non_blocking=True)
                if torch.equal(x, ref):  # expect: GPU202
                    pass
                same = x.equal(ref)  # expect: GPU202
                if same and not same:
                    pass
                a = torch.allclose(input=x, other=ref, atol=1e-2)  # expect: GPU202
                b = ref.allclose(x) or x.is_nonzero()  # expect: GPU202
                c = torch.is_nonzero(x[0])  # expect: GPU202
                assert torch.allclose(x.float(), ref.float()), "drifted"  # expect: GPU202
                # Host tensors, and comparisons that give tensors (no host read).
                d = torch.equal(x_cpu, y_cpu) and x_cpu.allclose(y_cpu) and torch.is_nonzero(y_cpu.sum())
                e = torch.equal(x.cpu(), ref.cpu())  # expect: GPU201
                f = torch.isclose(x, ref), x.eq(ref), torch.eq(x, ref)
                return a, b, c, d, e, f
    """)
    assert messages("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, x: torch.Tensor, ref: torch.Tensor):
                x = x.cuda()
                return torch.equal(x, ref), x.allclose(ref)
    """) == [
        ("undeclared GPU->CPU sync in model forward `Model.forward`: `torch.equal(x, ref)` (a Python bool read "
        "from tensor data)"),
        ("undeclared GPU->CPU sync in model forward `Model.forward`: `x.allclose(ref)` (a Python bool read from "
        "tensor data)"),
    ]


def test_python_bools_read_from_unknown_tensors_follow_the_unknown_device_option():
    # Like `.item()`: a tensor-only API, so an operand of unknown device counts in metadata builders.
    source = """
        import torch

        class FooMetadataBuilder:
            def build(self, common):
                return torch.equal(common.block_table, self.prev_block_table)  # expect: GPU202

        class Model(torch.nn.Module):
            def forward(self, x, ref):
                return x.allclose(ref)
    """
    check(source)
    assert findings(source, unknown_device="never") == set()
    assert findings(source, unknown_device="always") == {(6, "GPU202"), (10, "GPU202")}


def test_a_declaration_around_a_host_comparison_is_stale():
    check("""
        import torch
        from reference_kernels.sync_check import gpu_sync_allowed

        class FooMetadataBuilder:
            def build(self, common, seq_lens_cpu):
                with gpu_sync_allowed():  # expect: GPU203
                    unchanged = torch.equal(seq_lens_cpu, self.prev_seq_lens_cpu)
                with gpu_sync_allowed():
                    tied = torch.equal(common.seq_lens.cuda(), self.prev_seq_lens)
                return unchanged, tied
    """)


def test_a_helper_with_only_a_comparison_keeps_its_summary(tmp_path):
    # vLLM `spec_decode/eagle/utils.py`: a helper file whose one sync word is `torch.equal`; the
    # pre-filter must not skip it, or the hot caller loses the summary.
    root = _project(tmp_path, {
        "tying.py": """
            import torch

            def shares_weight(w, target):
                return torch.equal(w, target.weight)
        """,
        "head.py": """
            import torch
            from .tying import shares_weight

            class Head(torch.nn.Module):
                def forward(self, x: torch.Tensor):
                    if shares_weight(self.weight, self.embed):
                        return x
                    return x * 2
        """,
    })
    assert _project_findings(root, unknown_device="always") == {("head.py", 7, "GPU201")}
    assert _project_findings(root) == set()  # a parameter of unknown device outside a builder


# -- calls whose arguments rule out the helper's sync --------------------------------------------

def test_constant_arguments_rule_out_the_syncing_branch_of_a_same_file_helper():
    # vLLM `indexer_msa.py` calls `_fmha_sm100_plan(..., num_kv_splits=1)` without `kv_block_num`
    # (default -1): its `if kv_block_num > 0 and ...:` branch, the one that reaches
    # `sparse_fmha_plan`'s `.item()`, cannot run. The summary counts every branch; a call of a helper
    # of the same file is judged with its constants. Taken with the other values, it still syncs.
    # Its blocking copies onto the GPU (`torch.tensor(lens_list, device=device)`, GPU205) are in
    # the same branches and judged the same way: `f` takes neither.
    check("""
        import torch

        def plan(lens, device, split: int = -1, check=False, mode="auto", scratch=None):
            lens_list = lens.tolist()
            if split > 0 and max(lens_list) > 16:
                total = torch.tensor(lens_list, device=device).sum()
                return int(total.item())
            elif not check:
                pass
            else:
                torch.cuda.synchronize()
            if mode == "prefill" or scratch is not None:
                scratch.copy_(torch.tensor(lens_list, device=device))
                torch.cuda.current_stream().synchronize()
            return len(lens_list)

        def widen(lens, device, split=-1):
            split = split or 4  # rebound: the default no longer decides the test
            if split > 0:
                return torch.tensor(lens, device=device).sum().item()
            return 0

        def walrus(lens, device, split=-1):
            if (split := len(lens)) > 0:  # rebound too
                return torch.tensor(lens, device=device).sum().item()
            return 0

        def bounded(lens, device, low=0, high=8):
            if low < 4 < high:
                return 0
            else:
                return torch.tensor(lens, device=device).sum().item()

        class FooMetadataBuilder:
            def _plan(self, lens, enabled=False):
                if enabled:
                    return lens.cuda().max().item()
                return 0

            def build(self, common, device, split):
                lens_cpu = common.seq_lens_cpu
                a = plan(lens_cpu, device)
                b = plan(lens_cpu, device, check=False, mode="decode")
                c = plan(lens_cpu, device, -1, False, "auto", None) + bounded(lens_cpu, device)
                d = self._plan(common.seq_lens) + self._plan(common.seq_lens, enabled=False)
                e = plan(lens_cpu, device, split=4)  # expect: GPU201, GPU205
                f = plan(lens_cpu, device, -1, True)  # expect: GPU201
                g = plan(lens_cpu, device, mode="prefill")  # expect: GPU201, GPU205
                h = plan(lens_cpu, device, scratch=self.buf)  # expect: GPU201, GPU205
                i = plan(lens_cpu, device, split)  # expect: GPU201, GPU205
                j = widen(lens_cpu, device)  # expect: GPU201
                k = bounded(lens_cpu, device, high=2)  # expect: GPU201
                m = self._plan(common.seq_lens, enabled=True)  # expect: GPU201
                n = walrus(lens_cpu, device)  # expect: GPU201
                return a, b, c, d, e, f, g, h, i, j, k, m, n
    """)


def test_a_function_s_bindings_count_walrus_and_case_pattern_names_at_any_depth():
    """``syncs._Bindings`` (what a call's constant arguments and a memoised call's handed-out
    tensors rest on: a name bound more than once is no constant) counts the names a walrus binds
    inside any expression (a condition, a comprehension, a call's argument, a nested function)
    and those a ``case`` pattern binds, in a module that has a walrus; without one, it does not
    look into expressions."""
    import libcst as cst

    from sync_lint.analysis.syncs import _Bindings

    function = cst.parse_module(textwrap.dedent("""
        def f(xs, n=1):
            if (n := len(xs)) > 0:
                total = sum([(y := x * 2) for x in xs])
            print(g(w := 3), {k: (v := k) for k in xs})
            def inner():
                return (deep := 1)
            match xs:
                case [first, *rest] if (m := first):
                    pass
                case {"key": value, **others}:
                    pass
            return n
    """)).body[0]
    counts = _Bindings(function, walrus=True).counts
    assert {name: counts[name] for name in ("n", "y", "w", "v", "deep", "m", "total", "inner")} == {
        "n": 1, "y": 1, "w": 1, "v": 1, "deep": 1, "m": 1, "total": 1, "inner": 1,
    }
    assert counts["first"] >= 1 and counts["rest"] >= 1 and counts["value"] >= 1 and counts["others"] >= 1
    assert "y" not in _Bindings(function, walrus=False).counts


def test_a_memoised_helper_fed_by_another_memoised_helper_runs_once_per_key():
    # SGLang `VideoSparseAttentionMetadataBuilder.build`: `get_non_pad_index(variable_block_sizes,
    # n)` is `lru_cache`d and takes a tensor, but that tensor comes from the `lru_cache`d
    # `construct_variable_block_sizes(shape, tiles, device)`: the same object for the same key, so
    # the boolean-mask indexing runs once per shape. A tensor made per step misses every step.
    check("""
        import functools
        import torch

        @functools.lru_cache(maxsize=10)
        def block_sizes(shape: tuple[int, int], device: torch.device) -> torch.Tensor:
            return torch.full(shape, 4, device=device)

        @functools.lru_cache(maxsize=10)
        def non_pad_index(sizes: torch.LongTensor, width: int):
            index = torch.arange(sizes.shape[0] * width, device=sizes.device).view(-1, width)
            mask = torch.arange(width, device=sizes.device)[None, :] < sizes[:, None]
            return index[mask]

        @functools.lru_cache(maxsize=10)
        def reverse_index(index: torch.Tensor, scale: torch.Tensor = None):
            return torch.argsort(index.cuda()).max().item()

        def fresh_sizes(shape, device):
            return torch.full(shape, 4, device=device)

        class VsaMetadataBuilder:
            def build(self, shape, device: torch.device, step_sizes: torch.Tensor, sizes_arg: torch.Tensor):
                sizes = block_sizes(shape, device)
                index = non_pad_index(sizes, 8)
                a = reverse_index(index) + reverse_index(non_pad_index(block_sizes(shape, device), 8))
                b = non_pad_index(step_sizes, 8)  # expect: GPU201
                c = non_pad_index(sizes + 1, 8)  # expect: GPU201
                d = non_pad_index(fresh_sizes(shape, device), 8)  # expect: GPU201
                twice = block_sizes(shape, device)
                twice = twice.flip(0)
                e = non_pad_index(twice, 8)  # expect: GPU201
                sizes_arg = block_sizes(shape, device)
                f = non_pad_index(sizes_arg, 8)  # expect: GPU201
                g = reverse_index(index, scale=step_sizes)  # expect: GPU201
                return index, a, b, c, d, e, f, g

        class ShadowMetadataBuilder:
            def build(self, shape, device: torch.device):
                block_sizes = fresh_sizes
                return non_pad_index(block_sizes(shape, device), 8)  # expect: GPU201
    """)


def test_a_long_sync_call_is_quoted_with_its_end():
    """What syncs is the end of the call: a long one is shortened in its middle."""
    (message,) = messages("""
        import torch

        class FooMetadataBuilder:
            def build(self, common):
                torch.cuda.current_stream(self.device_of_this_builder).synchronize()
                return common
    """)
    assert message.endswith(": `torch.cuda.current_str..._builder).synchronize()`"), message


# -- GPU205: blocking copies onto the GPU (measured on an H100: each holds the host until the
# queued GPU work is done, and fails ``set_sync_debug_mode("error")``) ---------------------------

def test_blocking_copies_of_host_data_onto_the_gpu_in_hot_code():
    check("""
        import numpy as np
        import torch
        from reference_kernels.sync_check import gpu_sync_allowed


        class FlashMetadataBuilder:
            def build(self, common):
                a = common.query_start_loc_cpu.to(self.device)  # expect: GPU205
                b = torch.from_numpy(np.arange(4)).to(common.seq_lens.device)  # expect: GPU205
                c = self.block_table.cpu[:4].to(self.device, dtype=torch.int32)  # expect: GPU205
                d = torch.tensor([0, common.num_reqs], device=self.device)  # expect: GPU205
                self.slots.gpu.copy_(common.slot_mapping_cpu)  # expect: GPU205
                e = common.query_start_loc_cpu.to(self.device, non_blocking=True)
                f = torch.tensor([0, 1], pin_memory=True).to(self.device, non_blocking=True)
                self.slots.gpu.copy_(common.slot_mapping_cpu, non_blocking=True)
                with gpu_sync_allowed():
                    g = common.seq_lens_cpu.to(self.device)
                h = torch.tensor(common.seq_lens, device=self.device)  # unknown: maybe a GPU tensor
                i = torch.zeros(4, device=self.device)
                return a, b, c, d, e, f, g, h, i
    """)


def test_module_state_and_compiled_code_are_not_judged_as_copies_onto_the_gpu():
    """A parameter or buffer made on the CPU in ``__init__`` is on the GPU by ``forward`` (the
    module moved it); what ``torch.compile`` does with host data is the compiler's choice; a
    helper's copy of data it cannot tell is on the host is none, and set-up code is not judged."""
    check("""
        import torch


        class Norm(torch.nn.Module):
            def __init__(self, dim, device):
                super().__init__()
                self.weight = torch.nn.Parameter(torch.ones(dim))
                self.freqs = torch.ones(dim)
                self.table = torch.tensor([1, 2, 3]).to(device)

            def forward(self, x):
                return x * self.weight.to(x.device) + self.freqs.unsqueeze(0).to(x.device)


        @torch.compile
        def scaled(x):
            return x * torch.tensor([0.5, 2.0], device=x.device)


        def lens_on(device, lens):
            return torch.tensor(lens, device=device)


        class Model(torch.nn.Module):
            def forward(self, x, lens: list[int]):
                return scaled(x), lens_on(x.device, lens)
    """)


def test_a_blocking_copy_onto_the_gpu_is_gpu205_alone():
    """Not a GPU->CPU sync to GPU201/GPU202/GPU204 (nor does it make a declaration live or a
    helper sync for its callers), and GPU205 is a preview rule."""
    source = """
        import torch


        class FlashMetadataBuilder:
            def build(self, common):
                for i in range(4):
                    x = common.seq_lens_cpu.to(self.device)
                return x
    """
    assert findings(source) == {(8, "GPU205")}
    assert findings(source, preview=False) == set()


def test_a_hot_call_of_a_helper_that_copies_onto_the_gpu_is_reported_at_the_call():
    """A helper hot code calls that makes a blocking copy, itself or through what it calls, is
    reported at the hot call (as GPU201 reports a helper's sync); not one whose copy is
    asynchronous, declared or run once, a memoised one (its body runs once per key), a hot
    callee (its copy is reported where it is), nor a call that is declared or in set-up."""
    check("""
        import functools

        import torch
        from reference_kernels.sync_check import gpu_sync_allowed


        def positions_on(num_reqs, device):
            return torch.tensor(list(range(num_reqs)), dtype=torch.int32, device=device)


        def staged(num_reqs, device):
            return positions_on(num_reqs, device) + 1


        def lens_async(seq_lens_cpu, device):
            return seq_lens_cpu.to(device, non_blocking=True)


        def lens_declared(seq_lens_cpu, device):
            with gpu_sync_allowed():
                return seq_lens_cpu.to(device)


        @functools.cache
        def arange_on(n, device):
            return torch.tensor(list(range(n)), device=device)


        class FlashMetadataBuilder:
            def __init__(self, device):
                self.table = positions_on(8, device)
                self._scratch = None

            def _lazy(self, device):
                if self._scratch is None:
                    self._scratch = torch.tensor([0] * 8, device=device)
                return self._scratch

            def build(self, common_prefix_len, common):
                a = positions_on(common.num_reqs, self.device)  # expect: GPU205
                b = staged(common.num_reqs, self.device)  # expect: GPU205
                c = lens_async(common.seq_lens_cpu, self.device)
                d = lens_declared(common.seq_lens_cpu, self.device)
                e = arange_on(8, self.device)
                f = self._lazy(self.device)
                g = self.build_decode(common)
                with gpu_sync_allowed():
                    h = positions_on(common.num_reqs, self.device)
                return a, b, c, d, e, f, g, h

            def build_decode(self, common):
                return torch.tensor(common.decode_lens, device="cuda")  # unknown data: maybe on the GPU
    """)
    told = messages("""
        import torch


        def positions_on(num_reqs, device):
            return torch.tensor(list(range(num_reqs)), dtype=torch.int32, device=device)


        def staged(num_reqs, device):
            return positions_on(num_reqs, device) + 1


        class FlashMetadataBuilder:
            def build(self, common_prefix_len, common):
                return staged(common.num_reqs, self.device)
    """)
    assert told == [("blocking copy onto the GPU in hot path `FlashMetadataBuilder.build`: `staged()` calls "
                     "`positions_on` (line 10), which copies onto the GPU with `torch.tensor()` made on the GPU "
                     "from host data (a blocking copy) (line 6)")]


def test_a_helper_in_another_file_that_copies_onto_the_gpu_is_reported_at_the_hot_call(tmp_path):
    """Across files, through the project's summaries; a wrapper of the same file that only relays
    the call is followed too. The plan must keep the helper and the wrapper for GPU205 although
    neither may sync: the fast and the plain paths agree."""
    root = _project(tmp_path, {
        "staging.py": """
            import numpy as np
            import torch

            def upload_positions(num_reqs, device):
                return torch.from_numpy(np.arange(num_reqs, dtype=np.int32)).to(device)

            def upload_positions_async(num_reqs, device):
                return torch.from_numpy(np.arange(num_reqs, dtype=np.int32)).to(device, non_blocking=True)
        """,
        "builder.py": """
            from .staging import upload_positions, upload_positions_async

            def relay(num_reqs, device):
                return upload_positions(num_reqs, device)

            class FlashMetadataBuilder:
                def build(self, common_prefix_len, common):
                    a = upload_positions(common.num_reqs, self.device)  # expect: GPU205
                    b = relay(common.num_reqs, self.device)  # expect: GPU205
                    c = upload_positions_async(common.num_reqs, self.device)
                    return a, b, c
        """,
    })
    expected = {("builder.py", line, code) for line, code in expected_in_text((root / "builder.py").read_text())}
    assert _project_findings(root) == expected
    assert _project_findings(root, preview=False) == set()
    settings = make_settings(None, **OPTIONS)
    files = Discovery(DEFAULT_EXCLUDE, settings.root).files([str(root)])
    plain = Linter(settings, fast=False).run(files, jobs=1).diagnostics
    assert {(Path(d.path).name, d.line, d.code) for d in plain if d.code.startswith("GPU2")} == expected
    told = sorted(d.message for d in lint_paths([str(root)], **OPTIONS) if d.code == "GPU205")
    assert told[0].endswith("`relay()` calls `upload_positions` (line 5), which copies onto the GPU with a blocking "
                            "`.to()` of the CPU tensor `torch.from_numpy(np.ar..._reqs, dtype=np.int32))` onto the GPU "
                            "(line 6)"), told


def test_the_sync_analysis_looks_for_copies_onto_the_gpu_only_for_gpu205():
    """The analysis finds blocking copies only where the rule that reports them runs
    (``SyncAnalysis.finds_uploads``): a default run (GPU205 is preview) summarises none."""
    from sync_lint.analysis.syncs import UPLOAD_RULE
    from sync_lint.pipeline.source import decode
    from sync_lint.rules.gpu205_blocking_copy_to_gpu_in_hot_path import (
        BlockingCopyToGpuInHotPath,
    )

    assert UPLOAD_RULE == BlockingCopyToGpuInHotPath.code
    source = textwrap.dedent("""
        import torch

        def positions_on(num_reqs, device):
            return torch.tensor(list(range(num_reqs)), device=device)

        def lens_on(lens_cpu):
            return lens_cpu.cuda()
    """)

    def summaries(**options):
        facts = Linter(make_settings(None, **options)).lint_source(decode("helpers.py", source.encode()))
        return {name.rsplit(".", 1)[-1]: (s.upload, tuple(s.uploads_to)) for name, s in facts.summaries.items()}

    found = summaries(preview=True)
    assert found["positions_on"][1] == ("device",) and found["lens_on"][0].startswith("copies onto the GPU with")
    assert all(upload is None and not to for upload, to in summaries().values())


def test_a_helper_copies_onto_the_gpu_only_where_it_is_handed_a_gpu_device(tmp_path):
    """vLLM's ``make_tensor_with_pad(..., device="cpu")`` (``torch.from_numpy(a).to(device)``):
    a helper that copies onto the device it is handed copies nothing where it is handed the host,
    or left at a ``None`` default; a wrapper that hands on its own device parameter copies where
    it is handed a GPU one. Across files, through the project's summaries, and in one file."""
    helpers = """
        import numpy as np
        import torch

        def make_padded(rows, pad, device=None, dtype=None):
            return torch.from_numpy(np.array(rows)).to(device)

        def to_tensors(rows, vocab_size, device):
            padded = make_padded(rows, vocab_size, device="cpu")
            return padded.to(device, non_blocking=True)

        def padded_on(rows, device):
            return make_padded(rows, 0, device)
    """
    sampler = """
        import torch
        from .helpers import make_padded, padded_on, to_tensors

        class Sampler(torch.nn.Module):
            def forward(self, logits, rows):
                a = to_tensors(rows, logits.shape[-1], logits.device)
                b = make_padded(rows, 0)
                c = make_padded(rows, 0, device=torch.device("cpu"))
                d = padded_on(rows, "cpu")
                e = make_padded(rows, 0, device=logits.device)  # expect: GPU205
                f = padded_on(rows, logits.device)  # expect: GPU205
                # After `*args` the positions are not known: `device` may be `logits.device` here.
                g = make_padded(*rows[:1], 0, logits.device, "cpu")  # expect: GPU205
                return a, b, c, d, e, f, g
    """
    root = _project(tmp_path, {"helpers.py": helpers, "sampler.py": sampler})
    expected = {("sampler.py", line, code) for line, code in expected_in_text((root / "sampler.py").read_text())}
    assert _project_findings(root) == expected
    settings = make_settings(None, **OPTIONS)
    files = Discovery(DEFAULT_EXCLUDE, settings.root).files([str(root)])
    plain = Linter(settings, fast=False).run(files, jobs=1).diagnostics
    assert {(Path(d.path).name, d.line, d.code) for d in plain if d.code.startswith("GPU2")} == expected
    # The same in one file (the helpers judged with the call's arguments bound, where they can be).
    one_file = textwrap.dedent(helpers) + textwrap.dedent(sampler).replace("from .helpers import make_padded, padded_on, "
                                                                           "to_tensors\n", "")
    check(one_file)


def test_module_parameters_are_on_the_modules_device():
    """``nn.Parameter(torch.zeros(...))`` made in ``__init__`` moves with its module: a tensor
    concatenated with it is not known to be in host memory (vLLM ``Phi3HDImageEmbedding``)."""
    check("""
        import torch
        from torch import nn


        class ImageEmbedding(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.separator = nn.Parameter(torch.zeros([1, dim]))
                self.proj = nn.Linear(dim, dim)

            def forward(self, features):
                device = self.proj.weight.device
                joined = torch.cat([features, self.separator])
                return self.proj(joined.to(device))
    """)


# ``CustomOp`` is a module in its own file; ``SiluAndMul`` derives from it in another, and
# ``Fused`` from ``SiluAndMul`` in the same file: both ``forward`` methods are hot in a run of
# the package, as the plan and the plain path both see (``project_plan.ModuleClasses``).
CUSTOM_OP = """\
from torch import nn


class CustomOp(nn.Module):
    def forward(self, *args):
        return self.forward_native(*args)
"""
ACTIVATIONS = """\
import torch

from pkg.custom_op import CustomOp
from pkg.helpers import Options


class SiluAndMul(CustomOp):
    def forward(self, x: torch.Tensor):
        torch.cuda.synchronize()
        return x


class Fused(SiluAndMul):
    def forward(self, x: torch.Tensor):
        torch.cuda.synchronize()
        return x


class Config(Options):
    def forward(self, x: torch.Tensor):
        torch.cuda.synchronize()
        return x
"""
HELPERS = """\
class Options:
    def forward(self, x):
        return x
"""


def _module_package(root: Path) -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "custom_op.py").write_text(CUSTOM_OP)
    (root / "pkg" / "activations.py").write_text(ACTIVATIONS)
    (root / "pkg" / "helpers.py").write_text(HELPERS)
    return root / "pkg" / "activations.py"


def test_a_module_by_way_of_another_file_is_hot(tmp_path):
    from cli_runner import run

    activations = _module_package(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f'[tool.sync-lint]\nsync-guard = "{OPTIONS["sync_guard"]}"\n')
    sync = "GPU201 undeclared GPU->CPU sync in model forward"
    expected = [
        f"pkg/activations.py:9:9: {sync} `SiluAndMul.forward`: `torch.cuda.synchronize()`",
        f"pkg/activations.py:15:9: {sync} `Fused.forward`: `torch.cuda.synchronize()`",
    ]  # not ``Config.forward``: ``Options`` is no module
    for paths in (["pkg"], ["pkg", "--parse-whole-files"]):
        result = run("check", *paths, "--no-cache", "--output-format", "concise", cwd=tmp_path)
        assert result.stdout.splitlines() == expected, result
    # Checked alone (pre-commit), the file reads ``CustomOp``'s from beside it: the same answer.
    alone = run("check", "pkg/activations.py", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert alone.stdout.splitlines() == expected, alone
    # The fix loop lints the file again as the run did.
    fixed = run("fix", "pkg", "--unsafe-fixes", "--no-cache", cwd=tmp_path)
    assert fixed.returncode == 0, fixed
    assert activations.read_text().count("with gpu_sync_allowed():") == 2


def test_a_run_of_part_of_a_package_reads_the_bases_beyond_it(tmp_path):
    """Whether a class is an ``nn.Module`` does not hang on which files a run holds
    (``project_plan.outlines_beyond``): a run of one file, of two files, of a subpackage, by
    the plan and the plain path, read the bases' files from beside the run's package, through
    a package ``__init__`` that re-exports and a chain of two files; a warm run whose plan the
    cache holds makes it again when a file beyond the run changes. A base of a library that is
    not beside the package is not looked for."""
    from cli_runner import run

    pkg = tmp_path / "pkg"
    (pkg / "layers").mkdir(parents=True)
    (pkg / "models").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layers" / "__init__.py").write_text("from pkg.layers.linear import Linear as Linear\n")
    (pkg / "layers" / "base.py").write_text("from torch import nn\n\n\nclass Base(nn.Module):\n    pass\n")
    (pkg / "layers" / "linear.py").write_text("from pkg.layers.base import Base\n\n\nclass Linear(Base):\n    pass\n")
    (pkg / "models" / "__init__.py").write_text("")
    model = (
        "import torch\n\nfrom pkg.layers import Linear\nfrom otherlib import Plain\n\n\n"
        "class Model(Linear):\n    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n\n\n"
        "class Other(Plain):\n    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n"
    )
    (pkg / "models" / "llama.py").write_text(model)
    (pkg / "models" / "util.py").write_text("import torch\n\n\ndef helper(x):\n    return x\n")
    (tmp_path / "otherlib.py").write_text("class Plain:\n    pass\n")  # no package: not beside pkg's
    sync = "GPU201 undeclared GPU->CPU sync in model forward"
    expected = [f"pkg/models/llama.py:9:9: {sync} `Model.forward`: `torch.cuda.synchronize()`"]
    runs = (["pkg/models/llama.py"], ["pkg/models/llama.py", "pkg/models/util.py"], ["pkg/models"], ["pkg"])
    for paths in runs:
        for extra in ([], ["--parse-whole-files"]):
            result = run("check", *paths, "--no-cache", "--output-format", "concise", *extra, cwd=tmp_path)
            assert result.stdout.splitlines() == expected, (paths, extra, result)
    # Warm: the plan of ``pkg/models`` is cached; the base beyond the run stops being a module.
    for _ in range(2):
        warm = run("check", "pkg/models", "--output-format", "concise", cwd=tmp_path)
        assert warm.stdout.splitlines() == expected, warm
    (pkg / "layers" / "base.py").write_text("class Base:\n    pass\n")
    for paths in runs:
        again = run("check", *paths, "--output-format", "concise", cwd=tmp_path)
        assert again.stdout == "" and again.returncode == 0, (paths, again)


def test_a_base_beyond_the_run_imported_under_a_block_is_read(tmp_path):
    """A file read beyond a run for its classes' bases (``project_plan._skeleton``) binds the
    names its imports under a block bind (``try:`` / ``if TYPE_CHECKING:``), as the outline of a
    run of every file reads them: the model's ``forward`` is hot in a run of its file alone, of
    two files and of the package."""
    from cli_runner import run

    pkg = tmp_path / "pkg"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "core.py").write_text("from torch import nn\n\n\nclass CustomOp(nn.Module):\n    pass\n")
    (pkg / "layers.py").write_text(
        "from typing import TYPE_CHECKING\n\ntry:\n    from pkg.core import CustomOp\nexcept ImportError:  # a host without torch\n"
        "    CustomOp = object\nif TYPE_CHECKING:\n    from pkg.models.util import (\n        helper,\n    )\n\n\n"
        "class Base(CustomOp):\n    def extra(self):\n        from os import path\n        return path\n"
    )
    (pkg / "models" / "llama.py").write_text(
        "import torch\n\nfrom pkg.layers import Base\n\n\n"
        "class Model(Base):\n    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n"
    )
    (pkg / "models" / "util.py").write_text("def helper(x):\n    return x\n")
    for paths in (["pkg/models/llama.py"], ["pkg/models/llama.py", "pkg/models/util.py"], ["pkg"]):
        result = run("check", *paths, "--no-cache", "--output-format", "concise", cwd=tmp_path)
        assert [line.split(" ")[:2] for line in result.stdout.splitlines()] == [["pkg/models/llama.py:8:9:", "GPU201"]], (
            paths, result,
        )


def test_a_file_alone_that_no_gpu2xx_rule_may_report_in_reads_no_bases_beside_it(tmp_path, monkeypatch):
    """Checked alone, a file whose classes derive from another file's reads that file for its
    bases (``project_plan.may_hear_of_bases``) only where a rule that reads hot scopes may report
    in it: a parser's or a config's class, without a sync word, is not worth the read (a run of
    it runs no GPU2xx rule). The model beside it, with one, still reads them and is hot."""
    from sync_lint.pipeline import project_plan

    pkg = tmp_path / "pkg"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "layers.py").write_text("from torch import nn\n\n\nclass Base(nn.Module):\n    pass\n")
    (pkg / "models" / "config.py").write_text(
        "from pkg.layers import Base\n\n\nclass Config(Base):\n    def parse(self, text):\n        return text.strip()\n"
    )
    (pkg / "models" / "llama.py").write_text(
        "import torch\n\nfrom pkg.layers import Base\n\n\n"
        "class Model(Base):\n    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n"
    )
    read = []
    original = project_plan.outlines_beyond

    def counted(outlines, *args, **kwargs):
        read.append([Path(o.path).name for o in outlines])
        return original(outlines, *args, **kwargs)

    monkeypatch.setattr(project_plan, "outlines_beyond", counted)
    linter = Linter(make_settings(follow_imports="skip"))  # checked alone
    assert linter.run([str(pkg / "models" / "config.py")], jobs=1).diagnostics == []
    assert read == []
    found = linter.run([str(pkg / "models" / "llama.py")], jobs=1).diagnostics
    assert [(d.line, d.code) for d in found] == [(8, "GPU201")]
    assert read == [["llama.py"]]


@pytest.mark.parametrize("broken", BROKEN_KINDS)
def test_a_broken_file_beside_the_run_is_no_module(tmp_path, broken):
    """A base's file that does not parse, is not UTF-8, is a symlink loop or a folder named like
    a module: the run goes on, without a traceback, and the class is no module by way of it."""
    from cli_runner import run

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write_broken(pkg / "base.py", broken, "from torch import nn\n\n\nclass Layer(nn.Module):\n    pass\n")
    (pkg / "model.py").write_text(
        "import torch\n\nfrom pkg.base import Layer\n\n\nclass Model(Layer):\n"
        "    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n"
    )
    result = run("check", "pkg/model.py", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "" and "Traceback" not in result.stderr, result


def test_an_editor_buffer_reads_the_bases_beside_it(tmp_path):
    """The language server's engine (``DocumentLinter``) lints and fixes a buffer as
    ``sync-lint check`` of that file alone does: a base beside it that is a module makes its
    ``forward`` hot, in the findings and in the fixes."""
    from sync_lint.codemods import DocumentLinter

    activations = _module_package(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f'[tool.sync-lint]\nsync-guard = "{OPTIONS["sync_guard"]}"\n')
    engine = DocumentLinter()
    found = engine.lint(ACTIVATIONS, str(activations))
    assert [(d.line, d.code) for d in found] == [(9, "GPU201"), (15, "GPU201")]
    fixed = engine.fix(ACTIVATIONS, str(activations), unsafe=True).fixed
    assert fixed.count("with gpu_sync_allowed():") == 2


def test_module_classes_survive_cyclic_and_self_named_bases(tmp_path):
    """Bases that name each other across files, a class named like the base it imports, and a
    re-export through a package ``__init__``: the closure ends, and only the true modules count."""
    from cli_runner import run

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.base import Layer as Layer\n")
    (pkg / "base.py").write_text("from torch import nn\n\n\nclass Layer(nn.Module):\n    pass\n")
    (pkg / "a.py").write_text(
        "import torch\n\nfrom pkg.b import B\n\n\nclass A(B):\n"
        "    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n"
    )
    (pkg / "b.py").write_text(
        "import torch\n\nfrom pkg.a import A\n\n\nclass B(A):\n"
        "    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n"
    )
    (pkg / "c.py").write_text(
        "import torch\n\nfrom pkg import Layer\n\n\nclass Layer(Layer):\n"
        "    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n"
    )
    for extra in ([], ["--parse-whole-files"]):
        result = run("check", "pkg", "--no-cache", "--output-format", "concise", *extra, cwd=tmp_path, timeout=60)
        assert [line.split(": GPU")[0] for line in result.stdout.splitlines()] == ["pkg/c.py:8:9"], result
