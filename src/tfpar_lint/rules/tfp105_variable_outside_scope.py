from tfpar_lint import tfapi as api
from tfpar_lint.rule import CreatedOutsideScopeRule


class VariableOutsideScope(CreatedOutsideScopeRule):
    CODE = "TFP105"
    NAME = "variable-outside-scope"
    SUMMARY = "`tf.Variable` created outside `strategy.scope()` but used in a function run by `strategy.run`"
    FIX_HINT = "Create the variable inside `with strategy.scope():` (it becomes a MirroredVariable)."
    KIND = api.VARIABLE
    WHAT = "Variable"
    SEVERITY = "warning"
    MARKERS = (CreatedOutsideScopeRule.MARKERS[0], (".run(", "experimental_run", "call_for_each_replica"))
