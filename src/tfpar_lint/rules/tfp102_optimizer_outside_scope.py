from typing import Optional

from tfpar_lint import tfapi as api
from tfpar_lint import versions
from tfpar_lint.rule import CreatedOutsideScopeRule


class OptimizerOutsideScope(CreatedOutsideScopeRule):
    CODE = "TFP102"
    NAME = "optimizer-outside-scope"
    SUMMARY = "Keras optimizer created outside `strategy.scope()` but compiled or stepped under the strategy"
    FIX_HINT = "Create the optimizer inside `with strategy.scope():`."
    KIND = api.OPTIMIZER
    WHAT = "Optimizer"

    # The optimizers of Keras 3, and Keras 2's from TensorFlow 2.11 on, take the strategy in force
    # when they are made; TensorFlow 2.10's (OptimizerV2) and the legacy ones create their state
    # lazily under the variables' strategy (versions.builds_at_first_use).
    def applies(self, v) -> Optional[bool]:
        return versions.builds_at_first_use(self.module, v)

    def why(self, v) -> str:
        m = self.module
        keras = {"keras": 3, "tf_keras": 2}.get(versions.keras_flavor(m, v))  # None: either, both build at first use
        return (f" (with {versions.target_of(m).describe(keras)}: from TensorFlow 2.11 on, a Keras optimizer takes the strategy "
                f"in force when it is made)")

    def data(self, v) -> dict:
        t = versions.target_of(self.module)
        return {"tf_version": t.version_text(), "tf_version_source": t.source}
