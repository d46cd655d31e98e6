"""What `bert_tf.train.loop.train` calls between loops of steps: evaluation while
training, the best checkpoint and early stopping (`bert_tf.runs.best_checkpoint`) are
one such hook; the loop knows nothing of tasks or metrics.

    class MyHook(StepHook):
        every_steps = 50                      # loops end at multiples of 50
        def after_steps(self, step, model):   # at steps 50, 100, ... and the last
            ...
            return stop                       # True: the run stops here

    loop.train(..., hook=MyHook())
"""


class StepHook:
    """The base of a hook of the training loop (every method may be overridden).

    Attributes:
      every_steps: `after_steps` is called at the global steps that are multiples of
        this, and at the last step; the loop cuts its loops of `steps_per_loop` steps
        to end there. 0: after every loop of steps.
    """
    every_steps = 0

    def begin(self, step: int) -> bool:
        """Called once before the first loop, at the global step the run starts (or
        resumes) from.

        Returns:
          True when the run must train no further (it stopped early before).
        """
        del step
        return False

    def after_steps(self, step: int, model) -> bool:
        """Called after the loop of steps that reached global step `step`.

        Args:
          step: The global step reached.
          model: The model being trained (its weights at `step`).

        Returns:
          True to stop training at `step` (the loop saves a checkpoint there first).
        """
        del step, model
        return False

    def is_due(self, step: int, num_train_steps: int) -> bool:
        """Whether `after_steps` is called at `step`."""
        every = self.every_steps
        return not every or step % every == 0 or step >= num_train_steps

    def steps_to_next(self, step: int) -> int:
        """Steps from `step` to the next multiple of `every_steps` (None: no limit)."""
        every = self.every_steps
        return (step // every + 1) * every - step if every else None

    def end(self, model) -> None:
        """Called once when training has reached its last step (not when stopped by a
        signal), with the trained model: a task's end-of-run work (e.g. pre-training
        writes the model in the google-research layout)."""
        del model


class StepHooks(StepHook):
    """Several hooks as one (the loop takes one): those due at a step are called, and
    the run stops when any of them asks; a loop ends at the nearest step any of them is
    called at (every 100 and every 150: steps 100, 150, 200, 300, ...)."""

    def __init__(self, hooks):
        self.hooks = [hook for hook in hooks if hook is not None]
        everies = [hook.every_steps for hook in self.hooks if hook.every_steps]
        self.every_steps = min(everies) if everies else 0
        self._due = []  # the hooks `is_due` found due at the step it was asked about

    def begin(self, step: int) -> bool:
        return any([hook.begin(step) for hook in self.hooks])  # every hook begins

    def is_due(self, step: int, num_train_steps: int) -> bool:
        self._due = [hook for hook in self.hooks if hook.is_due(step, num_train_steps)]
        return bool(self._due)

    def after_steps(self, step: int, model) -> bool:
        return any([hook.after_steps(step, model) for hook in self._due])

    def steps_to_next(self, step: int) -> int:
        nexts = [hook.steps_to_next(step) for hook in self.hooks]
        nexts = [steps for steps in nexts if steps]
        return min(nexts) if nexts else None

    def end(self, model) -> None:
        for hook in self.hooks:
            hook.end(model)
