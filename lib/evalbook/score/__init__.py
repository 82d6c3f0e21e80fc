"""Scoring: model weights, the token encoder, BERTScore and cosine, retrieval, the embedding cache, engines."""
