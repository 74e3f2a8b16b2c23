"""The six model families of Pollux's evaluation (OSDI'21, Table 1), as adaptive jobs.

Each family is one Pollux training task mapped onto the gavel_ng workload profile whose
performance model it uses. Where the task is not one of our profiles (YOLOv3,
DeepSpeech2, BERT, NeuMF), it runs on the closest profile with its per-example work
scaled: ``work_scale`` is how many profile examples one task example costs, in compute
and in activation memory (forward FLOPs per example, task / profile), and
``param_bytes`` is the task's own gradient size, which sets its all-reduce volume.

| family | profile | work_scale | M0 | max batch | phi0 | growth | epochs x examples | class | share |
|---|---|---|---|---|---|---|---|---|---|
| cifar10 | ResNet-18 | 1 | 128 | 4096 | 532 | 64.6 | 100 x 50,000 | S | 36 % |
| imagenet | ResNet-50 | 1 | 200 | 12800 | 4,580 | 3.13 | 90 x 1,281,167 | XL | 2 % |
| yolov3 | ResNet-50 | 8 | 8 | 512 | 212 | 24.7 | 50 x 16,551 | L | 6 % |
| deepspeech2 | LM | 9 | 20 | 640 | 238 | 161 | 80 x 7,156 | M | 10 % |
| bert | Transformer | 23 | 12 | 384 | 423 | 2.66 | 2 x 88,641 | M | 10 % |
| ncf | Recommendation | 1/207 | 256 | 32768 | 18,565 | 3,185 | 10 x 4,970,845 | S | 36 % |

Sources:

* M0, optimizer, LR scaler, size class and share of jobs: Pollux Table 1.
* Maximum batch size, per-GPU batch bounds and whether gradient accumulation is on: the
  ``autoscale_batch_size(max, local_bsz_bounds, gradient_accumulation)`` call of each
  benchmark in the Pollux artifact (petuum/adaptdl, ``benchmark/models/*``). The upper
  per-GPU bound there is what fit a 16 GB T4 in the authors' setup; here the GPU's
  memory model decides instead (``ref_max_local_batch`` keeps their figure).
* Epochs: ``simulator/applications.py`` of the artifact (``max_epochs``). Examples per
  epoch: the ``progress`` column of ``simulator/traces/<family>/validation-<M0>.csv``,
  which counts M0-sized steps per statistical epoch (cifar10 390.7 x 128 = 50,000).
* phi0 and growth: the same files record per statistical epoch the gradient's squared
  norm and variance as AdaptDL estimates them (variance normalized to batch M0), so the
  noise scale is ``phi = M0 * grad_var / grad_sqr`` (AdaptDL's ``goodput.py``). ``phi0``
  is the median of phi over the first 10 % of epochs, ``phi0 * growth`` the median over
  the last 10 % (for bert, 2 epochs: the first and the last). The geometric curve
  between them is our simplification of the measured trajectories, which are not
  monotone (ImageNet jumps at each learning-rate step; ncf's first epoch is an outlier
  that the median over one epoch keeps). Growth ranges from 2.7x (bert fine-tuning) to
  3,185x (ncf); Pollux's text says "up to 10x or more". DeepSpeech2's late variance
  sits at AdaptDL's floor of 1e-6, so its late phi is a lower bound.
* work_scale: ratio of forward FLOPs per example. YOLOv3 at 416x416: 65.9 GFLOPs
  (Redmon & Farhadi 2018) over our ResNet-50 profile's 8.1 GFLOPs/image = 8.1.
  DeepSpeech2 (2 conv + 5 bidirectional GRU layers of 800, as in the artifact) on
  ~3.5 s utterances: ~18 GFLOPs over our LSTM LM profile's 2.0 GFLOPs/sequence = 9.
  BERT-base at sequence length 384: ~71 GFLOPs over our Transformer profile's 3.05 =
  23. NeuMF (32 factors, 3 MLP layers): 86 kFLOPs over our recommendation
  autoencoder's 17.8 MFLOPs/user = 1/207.
* param_bytes: FP32 gradients of the task's model: YOLOv3 61.9 M parameters,
  DeepSpeech2 as configured ~41 M, BERT-base 110 M, NeuMF on MovieLens-1M ~1.6 M;
  cifar10 and imagenet use their profile's own (ResNet-18 11.2 M, ResNet-50 25.6 M).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

from gavel_ng.errors import InputError

from .efficiency import AdaptiveSpec, PhiCurve

SIZE_CLASSES = {"S": (0.0, 1.0), "M": (1.0, 10.0), "L": (10.0, 100.0), "XL": (100.0, 1000.0)}
"""Pollux §5.1: total GPU-hours of a job of each size class."""

ARTIFACT = "petuum/adaptdl (Pollux OSDI'21 artifact)"


@dataclass(frozen=True)
class ElasticFamily:
    """One Pollux training task as an adaptive job family (see the module docstring)."""

    name: str
    task: str
    model: str
    dataset: str
    profile_family: str
    work_scale: float
    param_bytes: float | None  # gradient bytes all-reduced per step; None: the profile's
    init_batch: int
    max_batch: int
    min_local_batch: int
    ref_max_local_batch: int
    accumulation: bool
    optimizer: str
    lr_scaling: str
    epochs: int
    examples_per_epoch: int
    phi: PhiCurve
    size_class: str
    fraction: float
    note: str = ""

    @property
    def work(self) -> float:
        """M0-equivalent examples the whole training run needs (epochs x examples per epoch)."""
        return float(self.epochs * self.examples_per_epoch)

    def spec(self, **overrides: object) -> AdaptiveSpec:
        """This family's adaptive declaration; keyword arguments override single fields."""
        base = AdaptiveSpec(family=self.name, init_batch=self.init_batch, max_batch=self.max_batch,
                            lr_scaling=self.lr_scaling, min_local_batch=self.min_local_batch,
                            accumulation=self.accumulation)
        return replace(base, **overrides) if overrides else base  # type: ignore[arg-type]


FAMILIES: MappingProxyType[str, ElasticFamily] = MappingProxyType({f.name: f for f in (
    ElasticFamily(
        "cifar10", "image classification", "ResNet-18", "CIFAR-10", "ResNet-18", 1.0, None,
        init_batch=128, max_batch=4096, min_local_batch=32, ref_max_local_batch=1980, accumulation=False,
        optimizer="SGD", lr_scaling="adascale", epochs=100, examples_per_epoch=50_000,
        phi=PhiCurve(532.0, 64.6), size_class="S", fraction=0.36,
        note="same model and data set as our ResNet-18 profile"),
    ElasticFamily(
        "imagenet", "image classification", "ResNet-50", "ImageNet", "ResNet-50", 1.0, None,
        init_batch=200, max_batch=12800, min_local_batch=20, ref_max_local_batch=200, accumulation=True,
        optimizer="SGD", lr_scaling="adascale", epochs=90, examples_per_epoch=1_281_167,
        phi=PhiCurve(4580.0, 3.13), size_class="XL", fraction=0.02,
        note="same model and data set as our ResNet-50 profile"),
    ElasticFamily(
        "yolov3", "object detection", "YOLOv3", "PASCAL-VOC", "ResNet-50", 8.0, 61.9e6 * 4,
        init_batch=8, max_batch=512, min_local_batch=4, ref_max_local_batch=8, accumulation=True,
        optimizer="SGD", lr_scaling="adascale", epochs=50, examples_per_epoch=16_551,
        phi=PhiCurve(212.0, 24.7), size_class="L", fraction=0.06,
        note="Darknet-53 detector: convolutional like ResNet-50, ~8x its FLOPs per image at 416 px"),
    ElasticFamily(
        "deepspeech2", "speech recognition", "DeepSpeech2", "CMU-ARCTIC", "LM", 9.0, 41.0e6 * 4,
        init_batch=20, max_batch=640, min_local_batch=10, ref_max_local_batch=80, accumulation=True,
        optimizer="SGD", lr_scaling="adascale", epochs=80, examples_per_epoch=7_156,
        phi=PhiCurve(238.0, 161.0), size_class="M", fraction=0.10,
        note="recurrent (bidirectional GRU) model: mapped to our recurrent LSTM LM profile"),
    ElasticFamily(
        "bert", "question answering", "BERT (fine-tune)", "SQuAD", "Transformer", 23.0, 110.0e6 * 4,
        init_batch=12, max_batch=384, min_local_batch=4, ref_max_local_batch=64, accumulation=True,
        optimizer="AdamW", lr_scaling="sqrt", epochs=2, examples_per_epoch=88_641,
        phi=PhiCurve(423.0, 2.66), size_class="M", fraction=0.10,
        note="transformer encoder: mapped to our Transformer profile"),
    ElasticFamily(
        "ncf", "recommendation", "NeuMF", "MovieLens", "Recommendation", 1.0 / 207.0, 1.6e6 * 4,
        init_batch=256, max_batch=32768, min_local_batch=32, ref_max_local_batch=32768, accumulation=True,
        optimizer="Adam", lr_scaling="sqrt", epochs=10, examples_per_epoch=4_970_845,
        phi=PhiCurve(18565.0, 3185.0), size_class="S", fraction=0.36,
        note="small embedding + MLP recommender: mapped to our recommendation autoencoder profile"),
)})


def get_family(name: str) -> ElasticFamily:
    """A family by name (case-insensitive); InputError naming the known ones otherwise."""
    key = str(name).strip().lower()
    if key not in FAMILIES:
        raise InputError("family", name, f"unknown adaptive job family; known: {', '.join(FAMILIES)}")
    return FAMILIES[key]


def family_for_job_type(job_type: str) -> str | None:
    """The adaptive family whose profile is the job type's model ("ResNet-18 (batch size 32)" -> cifar10), or None."""
    model = str(job_type).split(" (", 1)[0].strip()
    return next((f.name for f in FAMILIES.values() if f.profile_family == model), None)


def parse_adaptive(data: object, job_type: str, where: str = "adaptive") -> AdaptiveSpec:
    """A job's ``adaptive`` object, its family defaulting to the job type's (`family_for_job_type`)."""
    spec = AdaptiveSpec.from_dict(data, where, family_for_job_type(job_type))
    if spec.family not in FAMILIES:
        raise InputError(f"{where}.family", spec.family, f"unknown adaptive job family; known: {', '.join(FAMILIES)}")
    return spec
