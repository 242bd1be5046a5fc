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
}


def cite(*keys: str) -> str:
    """The listed works for `keys`, one per line, numbered in the order given."""
    if not keys:
        raise ValueError(f"keys must name at least one work, from {sorted(REFERENCES)}")
    unknown = [k for k in keys if k not in REFERENCES]
    if unknown:
        raise ValueError(f"keys: unknown work(s) {unknown}; known: {sorted(REFERENCES)}")
    return "\n".join(f"[{i}] {REFERENCES[k]}" for i, k in enumerate(keys, 1))
