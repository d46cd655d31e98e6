"""Training: the custom loop, train steps, optimizers, tf.distribute, tf.data records."""
