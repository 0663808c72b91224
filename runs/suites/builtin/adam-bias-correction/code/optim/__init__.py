from optim.adam import Adam
from optim.clipping import clip_by_global_norm
from optim.schedules import warmup_cosine_lr
from optim.sgd import SGD


def build_optimizer(name, settings, weight_decay=0.0):
    if name in ("momentum", "nesterov"):
        return SGD(momentum=settings["momentum"], nesterov=settings["nesterov"])
    if name in ("adam", "amsgrad", "adamw"):
        return Adam(
            beta1=settings["beta1"],
            beta2=settings["beta2"],
            eps=settings["eps"],
            amsgrad=settings["amsgrad"],
            weight_decay=weight_decay if name == "adamw" else 0.0,
        )
    raise ValueError(f"unknown optimizer {name!r}")


__all__ = ["Adam", "SGD", "build_optimizer", "clip_by_global_norm", "warmup_cosine_lr"]
