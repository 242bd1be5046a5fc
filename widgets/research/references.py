"""The works the researcher notebooks cite, in one place, so that each notebook prints the list it uses.

Pure Python. `cite` refuses an unknown key, so a notebook cannot cite a work that is not listed.
"""
from __future__ import annotations

REFERENCES: dict[str, str] = {
    "ioffe2015": "Ioffe and Szegedy (2015), Batch Normalization: Accelerating Deep Network Training by Reducing "
                 "Internal Covariate Shift, arXiv:1502.03167.",
    "ioffe2017": "Ioffe (2017), Batch Renormalization: Towards Reducing Minibatch Dependence in Batch-Normalized "
                 "Models, arXiv:1702.03275.",
    "hoffer2017": "Hoffer, Hubara and Soudry (2017), Train longer, generalize better: closing the generalization "
                  "gap in large batch training of neural networks, arXiv:1705.08741 (ghost batch normalization).",
    "radford2021": "Radford et al. (2021), Learning Transferable Visual Models From Natural Language Supervision "
                   "(CLIP), arXiv:2103.00020.",
    "gao2021": "Gao, Zhang, Han and Callan (2021), Scaling Deep Contrastive Learning Batch Size under Memory "
               "Limited Setup, arXiv:2101.06983 (gradient cache).",
    "ga_bug_2024": "The 2024 gradient-accumulation loss-normalisation bug: reported in huggingface/trl issue #2175 "
                   "(2024-10-04, batch 32 vs batch 1 with 32 accumulation steps training differently); explained "
                   "in the Hugging Face blog post 'Fixing Gradient Accumulation' (huggingface/blog PR #2414, "
                   "October 2024) after Unsloth's analysis; fixed in transformers by normalising by the number of "
                   "items in the whole accumulation window (huggingface/transformers PR #34191, October 2024) and "
                   "in torchtune by 'Normalize CE loss by total number of (non-padding) tokens' "
                   "(meta-pytorch/torchtune PR #1875, 2024-10-20).",
    "micikevicius2018": "Micikevicius et al. (2018), Mixed Precision Training, arXiv:1710.03740 (float32 master "
                        "weights and loss scaling).",
    "thakur2005": "Thakur, Rabenseifner and Gropp (2005), Optimization of Collective Communication Operations in "
                  "MPICH, International Journal of High Performance Computing Applications 19(1) (the alpha-beta "
                  "cost model of ring all-reduce: 2(N-1) latency steps).",
    "li2020ddp": "Li et al. (2020), PyTorch Distributed: Experiences on Accelerating Data Parallel Training, "
                 "arXiv:2006.15704 (gradient buckets all-reduced while backward runs; no_sync).",
    "rajbhandari2020": "Rajbhandari et al. (2020), ZeRO: Memory Optimizations Toward Training Trillion Parameter "
                       "Models, arXiv:1910.02054 (stages 1-3 shard optimizer state, gradients, weights).",
    "zhao2023": "Zhao et al. (2023), PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel, "
                "arXiv:2304.11277.",
    "huang2019": "Huang et al. (2019), GPipe: Efficient Training of Giant Neural Networks using Pipeline "
                 "Parallelism, arXiv:1811.06965 (micro-batches, the bubble (p-1)/(m+p-1)).",
    "narayanan2021": "Narayanan et al. (2021), Efficient Large-Scale Language Model Training on GPU Clusters Using "
                     "Megatron-LM, arXiv:2104.04473 (the 1F1B schedule: same bubble, at most p micro-batches "
                     "in flight).",
    "tnt_1057": "meta-pytorch/tnt PR #1057 (FSDP2 set_requires_gradient_sync(False) keeps unsharded gradients: a "
                "26B model on 16 ranks, 3.25 GB of gradient shards per rank, ~52 GB unsharded).",
    "open_instruct_1498": "allenai/open-instruct PR #1498 (ZeRO-2 with gradient_accumulation_steps = 1 in the "
                          "DeepSpeed config and a hand-written accumulation loop: every backward is a boundary, "
                          "only the last micro-batch's gradient reaches step()).",
    "transformers_34242": "huggingface/transformers issue #34242 (DDP averages per-device loss means: a device with "
                          "few real tokens weighs as much as one with many); fixed by PR #34373, the "
                          "average_tokens_across_devices option.",
    "transformers_39392": "huggingface/transformers issue #39392 (average_tokens_across_devices still off by default; "
                          "one real label on one GPU, all real on the other, and each GPU weighs 50%).",
    "trl_3538": "huggingface/trl PR #3538 (SFT losses not comparable across 1, 2, 4 and 8 nodes at the same "
                "effective batch until average_tokens_across_devices is set).",
    "torchtitan_2206": "pytorch/torchtitan PR #2206 (handles valid-token imbalance in the train loop: loss sums divided by "
                       "the global valid-token count, all-reduced before the first backward); see also #1842 and "
                       "#1803 (the VLM fix scaling by ranks / global token count).",
    "transformers_35651": "huggingface/transformers #35651 (a loss normalised by the window's item count and then "
                          "divided by the accumulation steps again; 18 TRL trainers tracked in huggingface/trl #2617).",
    "swift_10117": "modelscope/ms-swift issue #10117 (the DAPO loss, already normalised by the window's completion "
                   "tokens, divided again by gradient_accumulation_steps G: a 1/4 update at G = 4; fixed in PR #10116).",
    "deepspeed_7439": "deepspeedai/DeepSpeed issue #7439 (engine.backward divides the loss by the accumulation steps "
                      "unless scale_wrt_gas=False: a loop that also divides gets 1/K of the update).",
    "transformers_35808": "huggingface/transformers PR #35808 (with DeepSpeed, grad_norm changed with "
                          "gradient_accumulation_steps; fixed by passing scale_wrt_gas=False).",
    "transformers_37766": "huggingface/transformers #37766 (a model whose loss ignores num_items_in_batch: the trainer "
                          "skips its own division, so the update is about K times too large).",
    "transformers_46204": "huggingface/transformers PR #46204 (num_items_in_batch counted every label, position 0 "
                          "too, but the causal LM loss shifts it off: one item too many per row).",
    "shao2024grpo": "Shao et al. (2024), DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language "
                    "Models, arXiv:2402.03300 (GRPO).",
    "yu2025dapo": "Yu et al. (2025), DAPO: An Open-Source LLM Reinforcement Learning System at Scale, arXiv:2503.14476 "
                  "(the token-level loss over the whole batch).",
    "liu2025drgrpo": "Liu et al. (2025), Understanding R1-Zero-Like Training: A Critical Perspective, arXiv:2503.20783 "
                     "(Dr. GRPO: a constant normaliser, no length bias).",
    "fedus2021switch": "Fedus, Zoph and Shazeer (2021), Switch Transformers: Scaling to Trillion Parameter Models with "
                       "Simple and Efficient Sparsity, arXiv:2101.03961 (the balance loss E * sum_e f_e * P_e).",
    "qiu2025balance": "Qiu et al. (2025), Demons in the Detail: On Implementing Load Balancing Loss for Training "
                      "Specialized Mixture-of-Expert Models, arXiv:2501.11873 (global-batch balance; used in Qwen3-MoE).",
    "trl_3021": "huggingface/trl issue #3021 (GRPO gets worse as gradient accumulation rises; the thread points at the "
                "per-micro-batch token mean).",
    "trl_3231": "huggingface/trl PR #3231 (the token-mean normaliser depends on how samples fall across devices and "
                "gradient-accumulation steps; proposes a constant one).",
    "trl_3256": "huggingface/trl PR #3256 (adds the Dr. GRPO loss type and names the per-micro-batch variant bnpo).",
    "trl_5619": "huggingface/trl issue #5619 (is the dapo loss normalised for accumulation? num_items_in_batch against "
                "steps_per_generation).",
    "trl_6024": "huggingface/trl PR #6024 (dapo mis-scaled by gradient_accumulation_steps / steps_per_generation: it "
                "divided by the generation batch's tokens, not the update's).",
    "automodel_3359": "NVIDIA-NeMo/Automodel PR #3359 (the MoE auxiliary loss entered every micro-batch's backward "
                      "without the accumulation normalisation).",
    "malladi2022": "Malladi et al. (2022), On the SDEs and Scaling Rules for Adaptive Gradient Algorithms, "
                   "arXiv:2205.10287 (batch x k: lr x sqrt(k), 1 - beta1 and 1 - beta2 x k, eps / sqrt(k)).",
    "marek2025": "Marek et al. (2025), Small Batch Size Training for Language Models: When Vanilla SGD Works, and Why "
                 "Gradient Accumulation Is Wasteful, arXiv:2507.07101 (beta2 kept by its half-life in tokens).",
    "bergsma2025": "Bergsma et al. (2025), Power Lines: Scaling Laws for Weight Decay and Batch Size in LLM "
                   "Pre-training, arXiv:2505.13738 (AdamW's timescale tau = B / (eta lambda D)).",
    "merrill2025": "Merrill et al. (2025), Critical Batch Size Revisited: A Simple Empirical Approach to Large-Batch "
                   "Language Model Training, arXiv:2505.23971 (batch-size warm-up from the measured critical batch: "
                   "OLMo-1B's loss in 43% fewer gradient steps).",
    "lightning_21491": "Lightning-AI/pytorch-lightning issue #21491 (with GradientAccumulationScheduler changing K "
                       "during training, the step counting the schedulers read goes wrong).",
    "lightning_1476": "Lightning-AI/pytorch-lightning issue #1476 (the LR scheduler stepped per forward pass: a "
                      "16000-step warm-up lasted 1000 updates with accumulate_grad_batches=16).",
    "mccandlish2018": "McCandlish, Kaplan, Amodei et al. (2018), An Empirical Model of Large-Batch Training, "
                      "arXiv:1812.06162 (B_noise = tr(H Sigma) / (G^T H G), B_simple = tr(Sigma) / |G|^2, "
                      "(S/S_min - 1)(E/E_min - 1) = 1).",
    "goyal2017": "Goyal et al. (2017), Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour, arXiv:1706.02677 "
                 "(linear learning-rate scaling with warmup).",
}


def cite(*keys: str) -> str:
    """The listed works for `keys`, one per line, numbered in the order given."""
    if not keys:
        raise ValueError(f"keys must name at least one work, from {sorted(REFERENCES)}")
    unknown = [k for k in keys if k not in REFERENCES]
    if unknown:
        raise ValueError(f"keys: unknown work(s) {unknown}; known: {sorted(REFERENCES)}")
    return "\n".join(f"[{i}] {REFERENCES[k]}" for i, k in enumerate(keys, 1))
