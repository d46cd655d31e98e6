"""The losses of sentence embeddings, in float32, as sentence-transformers computes them.

    loss = multiple_negatives_ranking_loss(anchors, positives, negatives, scale=20.0)
    loss = cosent_loss(first, second, scores, scale=20.0)
    loss = cosine_mse_loss(first, second, scores)

In-batch negatives across replicas: under a `tf.distribute` strategy every replica
gathers the positives (and hard negatives) of all replicas
(`ReplicaContext.all_gather`), so each anchor is ranked against the *global* batch, as
on one device. `all_gather` is differentiable: its gradient sums the replicas'
gradients for the gathered rows and hands each replica those of its own rows, so the
summed weight gradients are those of the global loss. CoSENT compares every pair of the
batch with every other: it is computed on the gathered batch too (each replica then
holds the same global loss). Cosine-similarity MSE is a mean over examples: each
replica's share needs nothing gathered.
"""

import tensorflow as tf

from bert_tf.tasks.sentence_embeddings.options import DEFAULT_SCALE, LOSSES



def gather_replicas(tensor):
    """(`tensor` of every replica concatenated on axis 0, index of this replica's first
    row there); `tensor` itself and 0 outside a strategy or with one replica."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return tensor, 0
    gathered = context.all_gather(tensor, axis=0)
    offset = context.replica_id_in_sync_group * tf.shape(tensor)[0]
    return gathered, offset


def cosine_matrix(a, b):
    """Cosine similarity of every row of `a` [N, H] with every row of `b` [M, H]: [N, M]."""
    a = tf.math.l2_normalize(tf.cast(a, tf.float32), axis=-1)
    b = tf.math.l2_normalize(tf.cast(b, tf.float32), axis=-1)
    return tf.matmul(a, b, transpose_b=True)


def cosine_pairs(a, b):
    """Cosine similarity of row i of `a` with row i of `b` ([N, H] each): [N]."""
    a = tf.math.l2_normalize(tf.cast(a, tf.float32), axis=-1)
    b = tf.math.l2_normalize(tf.cast(b, tf.float32), axis=-1)
    return tf.reduce_sum(a * b, axis=-1)


def _cross_entropy(labels, logits):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))


def multiple_negatives_ranking_loss(anchors, positives, negatives=None,
                                    scale=DEFAULT_SCALE, symmetric=False):
    """sentence-transformers' MultipleNegativesRankingLoss (and, with `symmetric`,
    MultipleNegativesSymmetricRankingLoss).

    Each anchor's logits are `scale` * its cosine similarity with every positive of the
    global batch, then every hard negative; cross-entropy with its own positive as the
    label, averaged over the anchors. `symmetric` averages that with the loss of each
    positive against every anchor (negatives left out).

    Args:
      anchors, positives: float [b, H] embeddings of this replica's rows.
      negatives: float [b, H] hard negatives, or None.
    """
    all_positives, offset = gather_replicas(positives)
    candidates = [all_positives]
    if negatives is not None:
        candidates.append(gather_replicas(negatives)[0])
    logits = scale * cosine_matrix(anchors, tf.concat(candidates, axis=0))  # [b, B (+ B)]
    labels = offset + tf.range(tf.shape(anchors)[0])  # [b]
    loss = _cross_entropy(labels, logits)
    if symmetric:
        all_anchors, _ = gather_replicas(anchors)
        backward = scale * cosine_matrix(positives, all_anchors)  # [b, B]
        loss = (loss + _cross_entropy(labels, backward)) / 2.0
    return loss


def cosent_loss(first, second, scores, scale=DEFAULT_SCALE):
    """sentence-transformers' CoSENTLoss: log(1 + sum over the pairs (i, j) of the
    (global) batch with score_i > score_j of exp(scale * (cos_j - cos_i))).

    Args:
      first, second: float [b, H] embeddings of the two texts of this replica's pairs.
      scores: float [b] gold scores (only their order counts).
    """
    first, _ = gather_replicas(first)
    second, _ = gather_replicas(second)
    scores, _ = gather_replicas(tf.cast(scores, tf.float32))
    cosines = scale * cosine_pairs(first, second)  # [B]
    # [i, j] = scale * (cos_i - cos_j), kept where score_i < score_j.
    differences = cosines[:, tf.newaxis] - cosines[tf.newaxis, :]
    ordered = scores[:, tf.newaxis] < scores[tf.newaxis, :]
    differences = tf.where(ordered, differences, tf.fill(tf.shape(differences), -1e12))
    return tf.reduce_logsumexp(tf.concat([[0.0], tf.reshape(differences, [-1])], axis=0))


def cosine_mse_loss(first, second, scores):
    """sentence-transformers' CosineSimilarityLoss: mean (cos(first, second) - score)^2,
    the scores normalized to 0 .. 1."""
    return tf.reduce_mean(tf.square(cosine_pairs(first, second)
                                    - tf.cast(scores, tf.float32)))


def sentence_loss(name, embeddings, texts_per_row, scores=None, scale=DEFAULT_SCALE):
    """Loss `name` (one of `LOSSES`) of a batch whose rows are laid out example by
    example: `embeddings` [b * T, H], T = `texts_per_row` (2: pairs, 3: triplets)."""
    if name not in LOSSES:
        raise ValueError(f"loss={name!r}: expected one of {', '.join(LOSSES)}")
    rows = tf.reshape(tf.cast(embeddings, tf.float32),
                      [-1, texts_per_row, tf.shape(embeddings)[-1]])  # [b, T, H]
    first, second = rows[:, 0], rows[:, 1]
    if name == "cosent":
        return cosent_loss(first, second, scores, scale)
    if name == "cosine_mse":
        return cosine_mse_loss(first, second, scores)
    negatives = rows[:, 2] if texts_per_row > 2 else None
    return multiple_negatives_ranking_loss(
        first, second, negatives, scale,
        symmetric=name == "multiple_negatives_symmetric_ranking")
