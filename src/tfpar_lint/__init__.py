"""tfpar-lint: find tf.distribute mistakes before the job is launched."""

__version__ = "0.1.0"
