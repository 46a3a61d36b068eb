from contextlib import nullcontext

import tensorflow as tf


class BaseTrainer:
    def __init__(self, model, strategy=None):
        self.model = model
        if strategy is None:
            strategy = tf.distribute.MirroredStrategy()
        self.strategy = strategy

    def strategy_scope(self):
        return self.strategy.scope() if self.strategy else nullcontext()


class KerasTrainer(BaseTrainer):
    def train(self, ds, optimizer="adam", epochs=1):
        with self.strategy_scope():
            self.model.compile(optimizer=optimizer, loss="mse")
            return self.model.fit(ds, epochs=epochs)
