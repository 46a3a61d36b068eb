from tfpar_lint import tfapi as api
from tfpar_lint.rules._objects import CreatedOutsideScopeRule


class OptimizerOutsideScope(CreatedOutsideScopeRule):
    CODE = "TFP102"
    NAME = "optimizer-outside-scope"
    SUMMARY = "Keras optimizer created outside `strategy.scope()` but compiled or stepped under the strategy"
    FIX_HINT = "Create the optimizer inside `with strategy.scope():`."
    KIND = api.OPTIMIZER
    WHAT = "Optimizer"
