"""Per model: the pool of served models and one runtime per loaded model."""
