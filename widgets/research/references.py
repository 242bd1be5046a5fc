"""The works the researcher notebooks cite, in one place, each with its address, so that each notebook
lists the works it uses as links.

A `Reference` is the text a notebook prints and its links: each a phrase of the text (an arXiv number,
"owner/repo PR #N") and its https address, the work itself first. To add a work: one entry at the end
of `REFERENCES`. Pure Python. `cite` refuses an unknown key, so a notebook cannot cite a work that is
not listed; in a notebook `cite(...)` shows the list with the phrases as links, `print(cite(...))` as
plain text.
"""
from __future__ import annotations

from typing import NamedTuple


class Reference(NamedTuple):
    """How a work is cited (`text`) and where it is: {phrase of the text: https address}."""

    text: str
    links: dict[str, str]

    def markdown(self) -> str:
        """The text with each linked phrase (its first occurrence in the text) as a markdown link."""
        spans = sorted((self.text.index(phrase), phrase, url) for phrase, url in self.links.items())
        out, end = [], 0
        for start, phrase, url in spans:
            out += [self.text[end:start], f"[{phrase}]({url})"]
            end = start + len(phrase)
        return "".join(out) + self.text[end:]


REFERENCES: dict[str, Reference] = {
    "ioffe2015": Reference(
        "Ioffe and Szegedy (2015), Batch Normalization: Accelerating Deep Network Training by Reducing "
        "Internal Covariate Shift, arXiv:1502.03167.",
        {"arXiv:1502.03167": "https://arxiv.org/abs/1502.03167"},
    ),
    "ioffe2017": Reference(
        "Ioffe (2017), Batch Renormalization: Towards Reducing Minibatch Dependence in Batch-Normalized "
        "Models, arXiv:1702.03275.",
        {"arXiv:1702.03275": "https://arxiv.org/abs/1702.03275"},
    ),
    "hoffer2017": Reference(
        "Hoffer, Hubara and Soudry (2017), Train longer, generalize better: closing the generalization gap in"
        " large batch training of neural networks, arXiv:1705.08741 (ghost batch normalization).",
        {"arXiv:1705.08741": "https://arxiv.org/abs/1705.08741"},
    ),
    "radford2021": Reference(
        "Radford et al. (2021), Learning Transferable Visual Models From Natural Language Supervision (CLIP),"
        " arXiv:2103.00020.",
        {"arXiv:2103.00020": "https://arxiv.org/abs/2103.00020"},
    ),
    "gao2021": Reference(
        "Gao, Zhang, Han and Callan (2021), Scaling Deep Contrastive Learning Batch Size under Memory Limited"
        " Setup, arXiv:2101.06983 (gradient cache).",
        {"arXiv:2101.06983": "https://arxiv.org/abs/2101.06983"},
    ),
    "ga_bug_2024": Reference(
        "The 2024 gradient-accumulation loss-normalisation bug: reported in huggingface/trl issue #2175 "
        "(2024-10-04, batch 32 vs batch 1 with 32 accumulation steps training differently); explained in the "
        "Hugging Face blog post 'Fixing Gradient Accumulation' (huggingface/blog PR #2414, October 2024) "
        "after Unsloth's analysis; fixed in transformers by normalising by the number of items in the whole "
        "accumulation window (huggingface/transformers PR #34191, October 2024) and in torchtune by "
        "'Normalize CE loss by total number of (non-padding) tokens' (meta-pytorch/torchtune PR #1875, "
        "2024-10-20).",
        {
            "huggingface/trl issue #2175": "https://github.com/huggingface/trl/issues/2175",
            "'Fixing Gradient Accumulation'": "https://huggingface.co/blog/gradient_accumulation",
            "huggingface/blog PR #2414": "https://github.com/huggingface/blog/pull/2414",
            "Unsloth's analysis": "https://unsloth.ai/blog/gradient",
            "huggingface/transformers PR #34191": "https://github.com/huggingface/transformers/pull/34191",
            "meta-pytorch/torchtune PR #1875": "https://github.com/meta-pytorch/torchtune/pull/1875",
        },
    ),
    "micikevicius2018": Reference(
        "Micikevicius et al. (2018), Mixed Precision Training, arXiv:1710.03740 (float32 master weights and "
        "loss scaling).",
        {"arXiv:1710.03740": "https://arxiv.org/abs/1710.03740"},
    ),
    "thakur2005": Reference(
        "Thakur, Rabenseifner and Gropp (2005), Optimization of Collective Communication Operations in MPICH,"
        " International Journal of High Performance Computing Applications 19(1) (the alpha-beta cost model "
        "of ring all-reduce: 2(N-1) latency steps).",
        {
            "International Journal of High Performance Computing Applications 19(1)": "https://doi.org/10.1177/1094342005051521",
        },
    ),
    "li2020ddp": Reference(
        "Li et al. (2020), PyTorch Distributed: Experiences on Accelerating Data Parallel Training, "
        "arXiv:2006.15704 (gradient buckets all-reduced while backward runs; no_sync).",
        {"arXiv:2006.15704": "https://arxiv.org/abs/2006.15704"},
    ),
    "rajbhandari2020": Reference(
        "Rajbhandari et al. (2020), ZeRO: Memory Optimizations Toward Training Trillion Parameter Models, "
        "arXiv:1910.02054 (stages 1-3 shard optimizer state, gradients, weights).",
        {"arXiv:1910.02054": "https://arxiv.org/abs/1910.02054"},
    ),
    "zhao2023": Reference(
        "Zhao et al. (2023), PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel, "
        "arXiv:2304.11277.",
        {"arXiv:2304.11277": "https://arxiv.org/abs/2304.11277"},
    ),
    "huang2019": Reference(
        "Huang et al. (2019), GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism, "
        "arXiv:1811.06965 (micro-batches, the bubble (p-1)/(m+p-1)).",
        {"arXiv:1811.06965": "https://arxiv.org/abs/1811.06965"},
    ),
    "narayanan2021": Reference(
        "Narayanan et al. (2021), Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM, arXiv:2104.04473 (the 1F1B schedule: same bubble, at most p micro-batches in flight).",
        {"arXiv:2104.04473": "https://arxiv.org/abs/2104.04473"},
    ),
    "tnt_1057": Reference(
        "meta-pytorch/tnt PR #1057 (FSDP2 set_requires_gradient_sync(False) keeps unsharded gradients: a 26B "
        "model on 16 ranks, 3.25 GB of gradient shards per rank, ~52 GB unsharded).",
        {"meta-pytorch/tnt PR #1057": "https://github.com/meta-pytorch/tnt/pull/1057"},
    ),
    "open_instruct_1498": Reference(
        "allenai/open-instruct PR #1498 (ZeRO-2 with gradient_accumulation_steps = 1 in the DeepSpeed config "
        "and a hand-written accumulation loop: every backward is a boundary, only the last micro-batch's "
        "gradient reaches step()).",
        {"allenai/open-instruct PR #1498": "https://github.com/allenai/open-instruct/pull/1498"},
    ),
    "transformers_34242": Reference(
        "huggingface/transformers issue #34242 (DDP averages per-device loss means: a device with few real "
        "tokens weighs as much as one with many); fixed by PR #34373, the average_tokens_across_devices "
        "option.",
        {
            "huggingface/transformers issue #34242": "https://github.com/huggingface/transformers/issues/34242",
            "PR #34373": "https://github.com/huggingface/transformers/pull/34373",
        },
    ),
    "transformers_39392": Reference(
        "huggingface/transformers issue #39392 (average_tokens_across_devices off by default: one real label "
        "on one GPU, all real on the other, and each GPU weighs 50%); PR #39395 (July 2025) made it default "
        "to True.",
        {
            "huggingface/transformers issue #39392": "https://github.com/huggingface/transformers/issues/39392",
            "PR #39395": "https://github.com/huggingface/transformers/pull/39395",
        },
    ),
    "trl_3538": Reference(
        "huggingface/trl PR #3538 (SFT losses not comparable across 1, 2, 4 and 8 nodes at the same effective"
        " batch until average_tokens_across_devices is set).",
        {"huggingface/trl PR #3538": "https://github.com/huggingface/trl/pull/3538"},
    ),
    "torchtitan_2206": Reference(
        "pytorch/torchtitan PR #2206 (handles valid-token imbalance in the train loop: loss sums divided by "
        "the global valid-token count, all-reduced before the first backward); see also #1842 and #1803 (the "
        "VLM fix scaling by ranks / global token count).",
        {
            "pytorch/torchtitan PR #2206": "https://github.com/pytorch/torchtitan/pull/2206",
            "#1842": "https://github.com/pytorch/torchtitan/issues/1842",
            "#1803": "https://github.com/pytorch/torchtitan/issues/1803",
        },
    ),
    "transformers_35651": Reference(
        "huggingface/transformers #35651 (a loss normalised by the window's item count and then divided by "
        "the accumulation steps again; 18 TRL trainers tracked in huggingface/trl #2617).",
        {
            "huggingface/transformers #35651": "https://github.com/huggingface/transformers/issues/35651",
            "huggingface/trl #2617": "https://github.com/huggingface/trl/issues/2617",
        },
    ),
    "swift_10117": Reference(
        "modelscope/ms-swift issue #10117 (the DAPO loss, already normalised by the window's completion "
        "tokens, divided again by gradient_accumulation_steps G: a 1/4 update at G = 4; fixed in PR #10116).",
        {
            "modelscope/ms-swift issue #10117": "https://github.com/modelscope/ms-swift/issues/10117",
            "PR #10116": "https://github.com/modelscope/ms-swift/pull/10116",
        },
    ),
    "deepspeed_7439": Reference(
        "deepspeedai/DeepSpeed issue #7439 (engine.backward divides the loss by the accumulation steps unless"
        " scale_wrt_gas=False: a loop that also divides gets 1/K of the update).",
        {"deepspeedai/DeepSpeed issue #7439": "https://github.com/deepspeedai/DeepSpeed/issues/7439"},
    ),
    "transformers_35808": Reference(
        "huggingface/transformers PR #35808 (with DeepSpeed, grad_norm changed with "
        "gradient_accumulation_steps; fixed by passing scale_wrt_gas=False).",
        {"huggingface/transformers PR #35808": "https://github.com/huggingface/transformers/pull/35808"},
    ),
    "transformers_37766": Reference(
        "huggingface/transformers #37766 (a model whose loss ignores num_items_in_batch: the trainer skips "
        "its own division, so the update is about K times too large).",
        {"huggingface/transformers #37766": "https://github.com/huggingface/transformers/issues/37766"},
    ),
    "transformers_46204": Reference(
        "huggingface/transformers PR #46204 (num_items_in_batch counted every label, position 0 too, but the "
        "causal LM loss shifts it off: one item too many per row).",
        {"huggingface/transformers PR #46204": "https://github.com/huggingface/transformers/pull/46204"},
    ),
    "shao2024grpo": Reference(
        "Shao et al. (2024), DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language "
        "Models, arXiv:2402.03300 (GRPO).",
        {"arXiv:2402.03300": "https://arxiv.org/abs/2402.03300"},
    ),
    "yu2025dapo": Reference(
        "Yu et al. (2025), DAPO: An Open-Source LLM Reinforcement Learning System at Scale, arXiv:2503.14476 "
        "(the token-level loss over the whole batch).",
        {"arXiv:2503.14476": "https://arxiv.org/abs/2503.14476"},
    ),
    "liu2025drgrpo": Reference(
        "Liu et al. (2025), Understanding R1-Zero-Like Training: A Critical Perspective, arXiv:2503.20783 "
        "(Dr. GRPO: a constant normaliser, no length bias).",
        {"arXiv:2503.20783": "https://arxiv.org/abs/2503.20783"},
    ),
    "fedus2021switch": Reference(
        "Fedus, Zoph and Shazeer (2021), Switch Transformers: Scaling to Trillion Parameter Models with "
        "Simple and Efficient Sparsity, arXiv:2101.03961 (the balance loss E * sum_e f_e * P_e).",
        {"arXiv:2101.03961": "https://arxiv.org/abs/2101.03961"},
    ),
    "qiu2025balance": Reference(
        "Qiu et al. (2025), Demons in the Detail: On Implementing Load Balancing Loss for Training "
        "Specialized Mixture-of-Expert Models, arXiv:2501.11873 (global-batch balance; used in Qwen3-MoE).",
        {"arXiv:2501.11873": "https://arxiv.org/abs/2501.11873"},
    ),
    "trl_3021": Reference(
        "huggingface/trl issue #3021 (GRPO gets worse as gradient accumulation rises; the thread points at "
        "the per-micro-batch token mean).",
        {"huggingface/trl issue #3021": "https://github.com/huggingface/trl/issues/3021"},
    ),
    "trl_3231": Reference(
        "huggingface/trl PR #3231 (the token-mean normaliser depends on how samples fall across devices and "
        "gradient-accumulation steps; proposes a constant one).",
        {"huggingface/trl PR #3231": "https://github.com/huggingface/trl/pull/3231"},
    ),
    "trl_3256": Reference(
        "huggingface/trl PR #3256 (adds the Dr. GRPO loss type and names the per-micro-batch variant bnpo).",
        {"huggingface/trl PR #3256": "https://github.com/huggingface/trl/pull/3256"},
    ),
    "trl_5619": Reference(
        "huggingface/trl issue #5619 (is the dapo loss normalised for accumulation? num_items_in_batch "
        "against steps_per_generation).",
        {"huggingface/trl issue #5619": "https://github.com/huggingface/trl/issues/5619"},
    ),
    "trl_6024": Reference(
        "huggingface/trl PR #6024 (dapo mis-scaled by gradient_accumulation_steps / steps_per_generation: it "
        "divided by the generation batch's tokens, not the update's).",
        {"huggingface/trl PR #6024": "https://github.com/huggingface/trl/pull/6024"},
    ),
    "automodel_3359": Reference(
        "NVIDIA-NeMo/Automodel PR #3359 (the MoE auxiliary loss entered every micro-batch's backward without "
        "the accumulation normalisation).",
        {"NVIDIA-NeMo/Automodel PR #3359": "https://github.com/NVIDIA-NeMo/Automodel/pull/3359"},
    ),
    "malladi2022": Reference(
        "Malladi et al. (2022), On the SDEs and Scaling Rules for Adaptive Gradient Algorithms, "
        "arXiv:2205.10287 (batch x k: lr x sqrt(k), 1 - beta1 and 1 - beta2 x k, eps / sqrt(k)).",
        {"arXiv:2205.10287": "https://arxiv.org/abs/2205.10287"},
    ),
    "marek2025": Reference(
        "Marek et al. (2025), Small Batch Size Training for Language Models: When Vanilla SGD Works, and Why "
        "Gradient Accumulation Is Wasteful, arXiv:2507.07101 (beta2 kept by its half-life in tokens).",
        {"arXiv:2507.07101": "https://arxiv.org/abs/2507.07101"},
    ),
    "bergsma2025": Reference(
        "Bergsma et al. (2025), Power Lines: Scaling Laws for Weight Decay and Batch Size in LLM "
        "Pre-training, arXiv:2505.13738 (AdamW's timescale tau = B / (eta lambda D), D the whole run's tokens).",
        {"arXiv:2505.13738": "https://arxiv.org/abs/2505.13738"},
    ),
    "merrill2025": Reference(
        "Merrill et al. (2025), Critical Batch Size Revisited: A Simple Empirical Approach to Large-Batch "
        "Language Model Training, arXiv:2505.23971 (batch-size warm-up from the measured critical batch: "
        "OLMo-1B's loss in 43% fewer gradient steps).",
        {"arXiv:2505.23971": "https://arxiv.org/abs/2505.23971"},
    ),
    "lightning_21491": Reference(
        "Lightning-AI/pytorch-lightning issue #21491 (a feature request: when GradientAccumulationScheduler changes "
        "K during training, schedule by the batches or tokens seen rather than by optimizer steps).",
        {"Lightning-AI/pytorch-lightning issue #21491": "https://github.com/Lightning-AI/pytorch-lightning/issues/21491"},
    ),
    "lightning_1476": Reference(
        "Lightning-AI/pytorch-lightning issue #1476 (the LR scheduler stepped per forward pass: a 16000-step "
        "warm-up lasted 1000 updates with accumulate_grad_batches=16).",
        {
            "Lightning-AI/pytorch-lightning issue #1476": "https://github.com/Lightning-AI/pytorch-lightning/issues/1476",
        },
    ),
    "mccandlish2018": Reference(
        "McCandlish, Kaplan, Amodei et al. (2018), An Empirical Model of Large-Batch Training, "
        "arXiv:1812.06162 (B_noise = tr(H Sigma) / (G^T H G), B_simple = tr(Sigma) / |G|^2, (S/S_min - "
        "1)(E/E_min - 1) = 1).",
        {"arXiv:1812.06162": "https://arxiv.org/abs/1812.06162"},
    ),
    "goyal2017": Reference(
        "Goyal et al. (2017), Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour, arXiv:1706.02677 "
        "(linear learning-rate scaling with warmup).",
        {"arXiv:1706.02677": "https://arxiv.org/abs/1706.02677"},
    ),
    "korthikanti2022": Reference(
        "Korthikanti et al. (2022), Reducing Activation Recomputation in Large Transformer Models, "
        "arXiv:2205.05198 (activations per layer s b h (34 + 5 a s / h) bytes).",
        {"arXiv:2205.05198": "https://arxiv.org/abs/2205.05198"},
    ),
    "chen2016": Reference(
        "Chen et al. (2016), Training Deep Nets with Sublinear Memory Cost, arXiv:1604.06174 (checkpointing).",
        {"arXiv:1604.06174": "https://arxiv.org/abs/1604.06174"},
    ),
    "dao2022": Reference(
        "Dao et al. (2022), FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness, "
        "arXiv:2205.14135.",
        {"arXiv:2205.14135": "https://arxiv.org/abs/2205.14135"},
    ),
    "hsu2024liger": Reference(
        "Hsu et al. (2024), Liger Kernel: Efficient Triton Kernels for LLM Training, arXiv:2410.10989 (a fused "
        "linear cross-entropy that never holds the whole logits).",
        {"arXiv:2410.10989": "https://arxiv.org/abs/2410.10989"},
    ),
    "deepspeed_6793": Reference(
        "deepspeedai/DeepSpeed issue #6793 (no_sync asserts under ZeRO-2 and ZeRO-3: their gradient partitioning "
        "needs the reduction at every micro-step; the assertion came with PR #6675, and transformers stopped "
        "calling no_sync there after issue #34984).",
        {
            "deepspeedai/DeepSpeed issue #6793": "https://github.com/deepspeedai/DeepSpeed/issues/6793",
            "PR #6675": "https://github.com/deepspeedai/DeepSpeed/pull/6675",
            "issue #34984": "https://github.com/huggingface/transformers/issues/34984",
        },
    ),
    "qi2024zerobubble": Reference(
        "Qi et al. (2024), Zero Bubble Pipeline Parallelism, arXiv:2401.10241 (backward split into its input and "
        "weight parts, scheduled into the bubble).",
        {"arXiv:2401.10241": "https://arxiv.org/abs/2401.10241"},
    ),
    "wang2024adamw": Reference(
        "Wang and Aitchison (2024), How to set AdamW's weight decay as you scale model and dataset size, "
        "arXiv:2405.13698 (AdamW as an EMA of updates, timescale B / (eta lambda N) in epochs of N examples).",
        {"arXiv:2405.13698": "https://arxiv.org/abs/2405.13698"},
    ),
    "deepseek2024v3": Reference(
        "DeepSeek-AI (2024), DeepSeek-V3 Technical Report, arXiv:2412.19437 (auxiliary-loss-free balancing by "
        "expert biases, with a small sequence-wise balance loss).",
        {"arXiv:2412.19437": "https://arxiv.org/abs/2412.19437"},
    ),
    "wang2024lossfree": Reference(
        "Wang et al. (2024), Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts, arXiv:2408.15664 "
        "(a per-expert bias on the routing scores, moved after each update by the load it saw).",
        {"arXiv:2408.15664": "https://arxiv.org/abs/2408.15664"},
    ),
    "zoph2022stmoe": Reference(
        "Zoph et al. (2022), ST-MoE: Designing Stable and Transferable Sparse Expert Models, arXiv:2202.08906 (the "
        "router z-loss; balance coefficient 1e-2).",
        {"arXiv:2202.08906": "https://arxiv.org/abs/2202.08906"},
    ),
    "trl_5375": Reference(
        "huggingface/trl issue #5375 (DAPO's paper averages the tokens of each prompt's group; TRL, like verl's "
        "default token-mean, averages all the tokens of the batch).",
        {"huggingface/trl issue #5375": "https://github.com/huggingface/trl/issues/5375"},
    ),
    "torchtitan": Reference(
        "pytorch/torchtitan (auxiliary-loss-free MoE balancing: tokens per expert summed over the micro-batches "
        "and all-reduced over the data-parallel ranks, the expert bias moved once per update).",
        {"pytorch/torchtitan": "https://github.com/pytorch/torchtitan"},
    ),
    # the works the beginner and developer notebooks link to (issue 25), each with its address
    "accelerate_ga_guide": Reference(
        "Hugging Face Accelerate, Performing gradient accumulation with Accelerate (usage guide: "
        "accelerator.accumulate, sync_gradients, the num_items_in_batch recipe).",
        {"Performing gradient accumulation with Accelerate":
         "https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation"},
    ),
    "lightning_ga": Reference(
        "PyTorch Lightning, Gradient accumulation (Trainer(accumulate_grad_batches=K)).",
        {"Gradient accumulation": "https://lightning.ai/docs/pytorch/stable/common/gradient_accumulation.html"},
    ),
    "pytorch_forum_36889": Reference(
        "PyTorch forums, Getting different values for single batch vs accumulating gradients (thread 36889).",
        {"Getting different values for single batch vs accumulating gradients":
         "https://discuss.pytorch.org/t/getting-different-values-for-single-batch-vs-accumulating-gradients/36889"},
    ),
}


class Citations:
    """A numbered list of works: plain text when printed, markdown links when a notebook shows it."""

    def __init__(self, keys: tuple[str, ...]):
        self.keys = keys

    def __str__(self) -> str:
        return "\n".join(f"[{i}] {REFERENCES[k].text}" for i, k in enumerate(self.keys, 1))

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return "\n".join(f"{i}. {REFERENCES[k].markdown()}" for i, k in enumerate(self.keys, 1))


def cite(*keys: str) -> Citations:
    """The listed works for `keys`, numbered in the order given."""
    if not keys:
        raise ValueError(f"keys must name at least one work, from {sorted(REFERENCES)}")
    unknown = [k for k in keys if k not in REFERENCES]
    if unknown:
        raise ValueError(f"keys: unknown work(s) {unknown}; known: {sorted(REFERENCES)}")
    return Citations(keys)
