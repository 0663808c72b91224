def learning_rate(epoch, budget, lr_init, lr_final):
    """Learning rate of an epoch: constant, then a linear decay, then constant at the final rate.

    Parameters
    ----------
    epoch : int
        The epoch's index, from 0.
    budget : int
        The epochs the schedule spans (the SWA start for SWA runs, all epochs otherwise).
    lr_init : float
        The initial learning rate.
    lr_final : float
        The learning rate from 90% of the budget on.

    Returns
    -------
    float
        With ``t = epoch / budget`` and ``r = lr_final / lr_init``: ``lr_init`` for ``t <= 0.5``,
        ``lr_init * (1 - (1 - r) * (t - 0.5) / 0.4)`` for ``0.5 < t <= 0.9``, ``lr_final`` after.
    """
    t = epoch / budget
    ratio = lr_final / lr_init
    # the fraction of the decay done: 0 up to half the budget, 1 from 90% of it on
    progress = min(max((t - 0.5) / 0.4, 0.0), 1.0)
    return lr_init * (1.0 - (1.0 - ratio) * progress)
