from tfpar_lint import tfapi as api
from tfpar_lint.rule import CreatedOutsideScopeRule


class MetricOutsideScope(CreatedOutsideScopeRule):
    CODE = "TFP103"
    NAME = "metric-outside-scope"
    SUMMARY = "Keras metric created outside `strategy.scope()` but compiled or updated under the strategy"
    FIX_HINT = "Create metric objects inside `with strategy.scope():`."
    KIND = api.METRIC
    WHAT = "Metric"
    SEVERITY = "warning"
