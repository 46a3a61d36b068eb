from tfpar_lint import tfapi as api
from tfpar_lint.rule import CreatedOutsideScopeRule


class ModelOutsideScope(CreatedOutsideScopeRule):
    CODE = "TFP101"
    NAME = "model-outside-scope"
    SUMMARY = "Keras model created outside `strategy.scope()` but compiled, fit or run under the strategy"
    FIX_HINT = "Build the model inside `with strategy.scope():` (call the builder there)."
    KIND = api.MODEL
    WHAT = "Keras model"
    # also a strategy created and never entered or used, beside a model (no scope, no run)
    MARKERS = (CreatedOutsideScopeRule.MARKERS[0], CreatedOutsideScopeRule.MARKERS[1] + ("Strategy(",))
